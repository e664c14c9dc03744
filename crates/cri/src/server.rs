//! The gRPC edge: both CRI services on one unix socket, each RPC handed to its module on a
//! blocking thread (the rkt library is synchronous), RPCs on the same pod one at a time
//! ([`PodLocks`]), RPCs on different pods at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

use crate::error::{invalid, unimplemented};
use crate::locks::PodLocks;
use crate::meta::pod_uuid;
use crate::options::Config;
use crate::proto::image_service_server::{ImageService, ImageServiceServer};
use crate::proto::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use crate::proto::*;
use crate::{container, exec, images, runtime_info, sandbox, stats};

/// Serves until SIGTERM or SIGINT.
pub fn run(config: Config) -> anyhow::Result<()> {
    // With an arena per thread, 50 pods started at once (as many blocking threads) made
    // 16 arenas, 9.5 MiB of the server's 13 MiB (bench scenario 13). One is plenty for
    // RPCs that mostly wait on the disk and on child processes (a second one held 0.8 MiB).
    rkt::stage::launch::use_one_arena();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(256)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(config))
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let socket = config.socket.clone();
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--listen: cannot create {}", dir.display()))?;
    }
    // A socket left by a server that ended is replaced; a live one is not taken over.
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        anyhow::bail!(
            "--listen: a server already answers on {} (stop it first)",
            socket.display()
        );
    }
    let _ = std::fs::remove_file(&socket);
    // Started now, so that the first pod does not wait for it; should it fail, each pod
    // tries again and says why.
    if let Err(e) = config.spawner.warm() {
        eprintln!("rkt-cri: warning: {e}");
    }
    let listener = tokio::net::UnixListener::bind(&socket)
        .with_context(|| format!("--listen: cannot listen on {}", socket.display()))?;
    eprintln!(
        "rkt-cri: listening on unix://{} (data {}, CNI configuration {})",
        socket.display(),
        config.dirs.data.value.display(),
        config.dirs.net_conf.value.display()
    );
    let config = Arc::new(config);
    let streaming = crate::streaming::Server::start(config.clone())?;
    let cri = Cri {
        config,
        locks: Arc::new(PodLocks::default()),
        streaming,
    };
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
    };
    tokio::spawn(trim_after_bursts());
    let served = tonic::transport::Server::builder()
        .add_service(RuntimeServiceServer::new(cri.clone()))
        .add_service(ImageServiceServer::new(cri))
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await;
    let _ = std::fs::remove_file(&socket);
    served.context("serving")
}

/// The accepted connections, each through the `:authority` relay.
fn incoming(
    listener: tokio::net::UnixListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<crate::authority::Relayed>> {
    UnixListenerStream::new(listener).map(|conn| conn.map(crate::authority::relay))
}

/// RPCs begun, and running, on blocking threads.
static BEGUN: AtomicUsize = AtomicUsize::new(0);
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// One RPC counted in [`BEGUN`] and, for as long as it lives, in [`RUNNING`].
struct Busy;

impl Busy {
    fn enter() -> Busy {
        BEGUN.fetch_add(1, Ordering::SeqCst);
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Busy
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Every 2 s, when RPCs ran since the last look and none runs now, gives glibc's free
/// memory back to the system: the allocator keeps freed pages in the middle of its heap
/// until trimmed (after a burst of 50 pods, the RPCs' threads and the connections' buffers
/// left megabytes there). With one arena a trim takes well under a millisecond, so a
/// kubelet that polls every second makes it trim every 2 s, which is cheap.
async fn trim_after_bursts() {
    let mut seen = 0;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let begun = BEGUN.load(Ordering::SeqCst);
        if begun != seen && RUNNING.load(Ordering::SeqCst) == 0 {
            seen = begun;
            rkt::stage::launch::release_idle_memory();
        }
    }
}

/// Both services.
#[derive(Clone)]
pub struct Cri {
    config: Arc<Config>,
    locks: Arc<PodLocks>,
    streaming: Arc<crate::streaming::Server>,
}

impl Cri {
    /// Runs `f` on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Config) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let config = self.config.clone();
        tokio::task::spawn_blocking(move || {
            let _busy = Busy::enter();
            f(&config)
        })
        .await
        .map_err(|e| Status::internal(format!("the request's thread failed: {e}")))?
    }

    /// Runs `f` on a blocking thread, holding the lock of the pod `id` (a sandbox or
    /// container ID, or a prefix of one) names.
    async fn on_pod<T: Send + 'static>(
        &self,
        id: &str,
        f: impl FnOnce(&Config) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        // A prefix shorter than a pod's UUID is resolved first.
        let key = match pod_uuid(id) {
            Some(uuid) => uuid,
            None => {
                let short = id.to_string();
                let found = self
                    .blocking(move |c| {
                        Ok(match container::find(c, &short)? {
                            Some(ct) => Some(ct.sandbox.pod.uuid.clone()),
                            None => sandbox::find(c, &short)?.map(|s| s.pod.uuid.clone()),
                        })
                    })
                    .await?;
                found.unwrap_or_else(|| id.to_string())
            }
        };
        let _guard = self.locks.lock(&key).await;
        self.blocking(f).await
    }
}

fn ok<T>(t: T) -> Result<Response<T>, Status> {
    Ok(Response::new(t))
}

#[tonic::async_trait]
impl RuntimeService for Cri {
    async fn version(
        &self,
        _: Request<VersionRequest>,
    ) -> Result<Response<VersionResponse>, Status> {
        ok(runtime_info::version())
    }

    async fn run_pod_sandbox(
        &self,
        req: Request<RunPodSandboxRequest>,
    ) -> Result<Response<RunPodSandboxResponse>, Status> {
        let req = req.into_inner();
        let pod_sandbox_id = self.blocking(move |c| sandbox::run(c, req)).await?;
        ok(RunPodSandboxResponse { pod_sandbox_id })
    }

    async fn stop_pod_sandbox(
        &self,
        req: Request<StopPodSandboxRequest>,
    ) -> Result<Response<StopPodSandboxResponse>, Status> {
        let id = req.into_inner().pod_sandbox_id;
        let i = id.clone();
        self.on_pod(&id, move |c| sandbox::stop(c, &i)).await?;
        ok(StopPodSandboxResponse {})
    }

    async fn remove_pod_sandbox(
        &self,
        req: Request<RemovePodSandboxRequest>,
    ) -> Result<Response<RemovePodSandboxResponse>, Status> {
        let id = req.into_inner().pod_sandbox_id;
        let i = id.clone();
        self.on_pod(&id, move |c| sandbox::remove(c, &i)).await?;
        ok(RemovePodSandboxResponse {})
    }

    async fn pod_sandbox_status(
        &self,
        req: Request<PodSandboxStatusRequest>,
    ) -> Result<Response<PodSandboxStatusResponse>, Status> {
        let req = req.into_inner();
        let resp = self
            .blocking(move |c| {
                let s = sandbox::get(c, &req.pod_sandbox_id)?;
                Ok(sandbox::status(&s, req.verbose))
            })
            .await?;
        ok(resp)
    }

    async fn list_pod_sandbox(
        &self,
        req: Request<ListPodSandboxRequest>,
    ) -> Result<Response<ListPodSandboxResponse>, Status> {
        let filter = req.into_inner().filter;
        let items = self.blocking(move |c| sandbox::list_cri(c, filter)).await?;
        ok(ListPodSandboxResponse { items })
    }

    async fn create_container(
        &self,
        req: Request<CreateContainerRequest>,
    ) -> Result<Response<CreateContainerResponse>, Status> {
        let req = req.into_inner();
        let id = req.pod_sandbox_id.clone();
        let container_id = self.on_pod(&id, move |c| container::create(c, req)).await?;
        ok(CreateContainerResponse { container_id })
    }

    async fn start_container(
        &self,
        req: Request<StartContainerRequest>,
    ) -> Result<Response<StartContainerResponse>, Status> {
        let id = req.into_inner().container_id;
        let i = id.clone();
        self.on_pod(&id, move |c| container::start(c, &i)).await?;
        ok(StartContainerResponse {})
    }

    async fn stop_container(
        &self,
        req: Request<StopContainerRequest>,
    ) -> Result<Response<StopContainerResponse>, Status> {
        let req = req.into_inner();
        let id = req.container_id.clone();
        self.on_pod(&id, move |c| {
            container::stop(c, &req.container_id, req.timeout)
        })
        .await?;
        ok(StopContainerResponse {})
    }

    async fn remove_container(
        &self,
        req: Request<RemoveContainerRequest>,
    ) -> Result<Response<RemoveContainerResponse>, Status> {
        let id = req.into_inner().container_id;
        let i = id.clone();
        self.on_pod(&id, move |c| container::remove(c, &i)).await?;
        ok(RemoveContainerResponse {})
    }

    async fn list_containers(
        &self,
        req: Request<ListContainersRequest>,
    ) -> Result<Response<ListContainersResponse>, Status> {
        let filter = req.into_inner().filter;
        let containers = self.blocking(move |c| container::list(c, filter)).await?;
        ok(ListContainersResponse { containers })
    }

    async fn container_status(
        &self,
        req: Request<ContainerStatusRequest>,
    ) -> Result<Response<ContainerStatusResponse>, Status> {
        let req = req.into_inner();
        let resp = self
            .blocking(move |c| {
                let ct = container::get(c, &req.container_id)?;
                Ok(container::status(&ct, req.verbose))
            })
            .await?;
        ok(resp)
    }

    async fn update_container_resources(
        &self,
        _: Request<UpdateContainerResourcesRequest>,
    ) -> Result<Response<UpdateContainerResourcesResponse>, Status> {
        Err(unimplemented(
            "UpdateContainerResources",
            "changing a running container's limits is not implemented by rkt-cri yet",
        ))
    }

    async fn reopen_container_log(
        &self,
        req: Request<ReopenContainerLogRequest>,
    ) -> Result<Response<ReopenContainerLogResponse>, Status> {
        let id = req.into_inner().container_id;
        let i = id.clone();
        self.on_pod(&id, move |c| container::reopen_log(c, &i))
            .await?;
        ok(ReopenContainerLogResponse {})
    }

    async fn exec_sync(
        &self,
        req: Request<ExecSyncRequest>,
    ) -> Result<Response<ExecSyncResponse>, Status> {
        let req = req.into_inner();
        // Not under the pod's lock: an exec may run long, and other RPCs on the pod go on.
        let resp = self
            .blocking(move |c| {
                let ct = container::get(c, &req.container_id)?;
                exec::exec_sync(&ct, req.cmd, req.timeout)
            })
            .await?;
        ok(resp)
    }

    async fn exec(&self, req: Request<ExecRequest>) -> Result<Response<ExecResponse>, Status> {
        let req = req.into_inner();
        let request = self
            .blocking(move |c| crate::streaming::requests::exec(c, req))
            .await?;
        ok(ExecResponse {
            url: self.streaming.url(request),
        })
    }

    async fn attach(
        &self,
        req: Request<AttachRequest>,
    ) -> Result<Response<AttachResponse>, Status> {
        let req = req.into_inner();
        let request = self
            .blocking(move |c| crate::streaming::requests::attach(c, req))
            .await?;
        ok(AttachResponse {
            url: self.streaming.url(request),
        })
    }

    async fn port_forward(
        &self,
        req: Request<PortForwardRequest>,
    ) -> Result<Response<PortForwardResponse>, Status> {
        let req = req.into_inner();
        let request = self
            .blocking(move |c| crate::streaming::requests::port_forward(c, req))
            .await?;
        ok(PortForwardResponse {
            url: self.streaming.url(request),
        })
    }

    async fn container_stats(
        &self,
        req: Request<ContainerStatsRequest>,
    ) -> Result<Response<ContainerStatsResponse>, Status> {
        let id = req.into_inner().container_id;
        let stats = self
            .blocking(move |c| Ok(stats::container_stats(&container::get(c, &id)?)))
            .await?;
        ok(ContainerStatsResponse { stats: Some(stats) })
    }

    async fn list_container_stats(
        &self,
        req: Request<ListContainerStatsRequest>,
    ) -> Result<Response<ListContainerStatsResponse>, Status> {
        let filter = req.into_inner().filter.unwrap_or_default();
        let stats = self
            .blocking(move |c| {
                let listed = container::list(
                    c,
                    Some(ContainerFilter {
                        id: filter.id,
                        state: None,
                        pod_sandbox_id: filter.pod_sandbox_id,
                        label_selector: filter.label_selector,
                    }),
                )?;
                let mut out = Vec::new();
                for item in listed {
                    if let Some(ct) = container::find(c, &item.id)? {
                        out.push(stats::container_stats(&ct));
                    }
                }
                Ok(out)
            })
            .await?;
        ok(ListContainerStatsResponse { stats })
    }

    async fn pod_sandbox_stats(
        &self,
        _: Request<PodSandboxStatsRequest>,
    ) -> Result<Response<PodSandboxStatsResponse>, Status> {
        Err(unimplemented(
            "PodSandboxStats",
            "pod-level stats are not implemented by rkt-cri yet (ContainerStats is)",
        ))
    }

    async fn list_pod_sandbox_stats(
        &self,
        _: Request<ListPodSandboxStatsRequest>,
    ) -> Result<Response<ListPodSandboxStatsResponse>, Status> {
        Err(unimplemented(
            "ListPodSandboxStats",
            "pod-level stats are not implemented by rkt-cri yet (ListContainerStats is)",
        ))
    }

    async fn update_runtime_config(
        &self,
        req: Request<UpdateRuntimeConfigRequest>,
    ) -> Result<Response<UpdateRuntimeConfigResponse>, Status> {
        let cidr = req
            .into_inner()
            .runtime_config
            .and_then(|r| r.network_config)
            .map(|n| n.pod_cidr)
            .unwrap_or_default();
        if !cidr.is_empty() {
            // The pod network's IPAM is its CNI configuration's: rkt-cri writes none.
            eprintln!(
                "rkt-cri: UpdateRuntimeConfig: pod CIDR {cidr} noted; the CNI configuration's \
                 IPAM decides pods' addresses"
            );
        }
        ok(UpdateRuntimeConfigResponse {})
    }

    async fn status(
        &self,
        req: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let verbose = req.into_inner().verbose;
        let resp = self
            .blocking(move |c| Ok(runtime_info::status(c, verbose)))
            .await?;
        ok(resp)
    }

    async fn checkpoint_container(
        &self,
        _: Request<CheckpointContainerRequest>,
    ) -> Result<Response<CheckpointContainerResponse>, Status> {
        Err(unimplemented(
            "CheckpointContainer",
            "checkpointing (CRIU) is not supported by rkt",
        ))
    }

    type GetContainerEventsStream = tokio_stream::Empty<Result<ContainerEventResponse, Status>>;

    async fn get_container_events(
        &self,
        _: Request<GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        Err(unimplemented(
            "GetContainerEvents",
            "container events (evented PLEG) are not implemented by rkt-cri; kubelet polls",
        ))
    }

    async fn list_metric_descriptors(
        &self,
        _: Request<ListMetricDescriptorsRequest>,
    ) -> Result<Response<ListMetricDescriptorsResponse>, Status> {
        Err(unimplemented(
            "ListMetricDescriptors",
            "CRI metrics are not implemented by rkt-cri",
        ))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _: Request<ListPodSandboxMetricsRequest>,
    ) -> Result<Response<ListPodSandboxMetricsResponse>, Status> {
        Err(unimplemented(
            "ListPodSandboxMetrics",
            "CRI metrics are not implemented by rkt-cri",
        ))
    }
}

#[tonic::async_trait]
impl ImageService for Cri {
    async fn list_images(
        &self,
        req: Request<ListImagesRequest>,
    ) -> Result<Response<ListImagesResponse>, Status> {
        let filter = req
            .into_inner()
            .filter
            .and_then(|f| f.image)
            .map(|i| i.image)
            .unwrap_or_default();
        let images = self
            .blocking(move |c| {
                let store = images::store(c).map_err(|e| crate::error::internal(&e))?;
                let records = if filter.is_empty() {
                    store.images().map_err(crate::error::lib)?
                } else {
                    images::find(&store, &filter)
                        .map_err(|e| crate::error::internal(&e))?
                        .into_iter()
                        .collect()
                };
                Ok(records.iter().map(|r| images::to_cri(&store, r)).collect())
            })
            .await?;
        ok(ListImagesResponse { images })
    }

    async fn image_status(
        &self,
        req: Request<ImageStatusRequest>,
    ) -> Result<Response<ImageStatusResponse>, Status> {
        let req = req.into_inner();
        let name = req.image.map(|i| i.image).unwrap_or_default();
        if name.is_empty() {
            return Err(invalid("ImageStatus: no image given"));
        }
        let image = self
            .blocking(move |c| {
                let store = images::store(c).map_err(|e| crate::error::internal(&e))?;
                Ok(images::find(&store, &name)
                    .map_err(|e| crate::error::internal(&e))?
                    .map(|r| images::to_cri(&store, &r)))
            })
            .await?;
        ok(ImageStatusResponse {
            image,
            info: Default::default(),
        })
    }

    async fn pull_image(
        &self,
        req: Request<PullImageRequest>,
    ) -> Result<Response<PullImageResponse>, Status> {
        let req = req.into_inner();
        let name = req.image.map(|i| i.image).unwrap_or_default();
        if name.is_empty() {
            return Err(invalid("PullImage: no image given"));
        }
        let auth = req.auth;
        let image_ref = self
            .blocking(move |c| {
                images::pull(c, &name, auth.as_ref()).map_err(|e| crate::error::internal(&e))
            })
            .await?;
        ok(PullImageResponse { image_ref })
    }

    async fn remove_image(
        &self,
        req: Request<RemoveImageRequest>,
    ) -> Result<Response<RemoveImageResponse>, Status> {
        let name = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        if name.is_empty() {
            return Err(invalid("RemoveImage: no image given"));
        }
        self.blocking(move |c| images::remove(c, &name).map_err(|e| crate::error::internal(&e)))
            .await?;
        ok(RemoveImageResponse {})
    }

    async fn image_fs_info(
        &self,
        _: Request<ImageFsInfoRequest>,
    ) -> Result<Response<ImageFsInfoResponse>, Status> {
        let usage = self
            .blocking(|c| images::fs_info(c).map_err(|e| crate::error::internal(&e)))
            .await?;
        ok(ImageFsInfoResponse {
            image_filesystems: vec![usage],
        })
    }
}
