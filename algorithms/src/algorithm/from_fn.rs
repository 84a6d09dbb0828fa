//! [`FnAlgorithm`]: a closure with a name and a collective, the algorithm
//! behind [`Algorithm::from_fn`](crate::Algorithm::from_fn).

use crate::algorithm::{CollectiveAlgorithm, Running};
use crate::any_fabric::AnyFabric;
use crate::collective::{Collective, Params};
use crate::dtype::ReduceOp;
use crate::payload::Payload;

/// A closure with a name and a collective (see
/// [`Algorithm::from_fn`](crate::Algorithm::from_fn)).
pub(super) struct FnAlgorithm<F> {
    /// Its name.
    pub(super) name: String,
    /// Its collective.
    pub(super) collective: Collective,
    /// Its code.
    pub(super) run: F,
}

impl<F> CollectiveAlgorithm for FnAlgorithm<F>
where
    F: for<'a> Fn(AnyFabric<'a>, &'a mut Payload, ReduceOp, &'a Params) -> Running<'a>
        + Send
        + Sync
        + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn collective(&self) -> Collective {
        self.collective
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        (self.run)(fabric, buf, op, params)
    }
}
