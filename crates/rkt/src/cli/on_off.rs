//! rkt's on/off flags: `--flag` alone means on, `--flag=true|false` (or `1/0`, `yes/no`,
//! `on/off`) says which, as upstream rkt's flags take them; the value needs its `=`, so the
//! word after a bare flag is never taken as its value.

use clap::builder::BoolishValueParser;
use clap::{Arg, ArgAction};

/// `#[arg(long, on_off = false)]` for a `bool` field (off when absent), `on_off = None` for
/// an `Option<bool>` (unset when absent).
pub trait OnOff {
    fn on_off(self, absent: impl Into<Option<bool>>) -> Self;
}

impl OnOff for Arg {
    fn on_off(self, absent: impl Into<Option<bool>>) -> Arg {
        let arg = self
            .action(ArgAction::Set)
            .value_name("BOOL")
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .value_parser(BoolishValueParser::new());
        match absent.into() {
            Some(false) => arg.default_value("false"),
            Some(true) => arg.default_value("true"),
            None => arg,
        }
    }
}
