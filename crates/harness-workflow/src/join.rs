//! Several cancellable workflow futures awaited together (a round's tool calls, issue 29):
//! done when all are, and a cancel reaches each. Polled in order, so replay is
//! deterministic.

use futures::future::FusedFuture;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use temporalio_sdk::CancellableFuture;

pub(crate) struct JoinCancellable<F: Future> {
    futures: Vec<Pin<Box<F>>>,
    outputs: Vec<Option<F::Output>>,
    done: bool,
}

impl<F: Future> JoinCancellable<F> {
    pub(crate) fn new(futures: impl IntoIterator<Item = F>) -> Self {
        let futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
        let outputs = futures.iter().map(|_| None).collect();
        Self { futures, outputs, done: false }
    }
}

impl<F: Future> Unpin for JoinCancellable<F> {}

impl<F: Future> Future for JoinCancellable<F> {
    /// Each future's output in the order given; never an error of its own.
    type Output = Result<Vec<F::Output>, temporalio_sdk::ActivityExecutionError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut pending = false;
        for (future, output) in this.futures.iter_mut().zip(this.outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *output = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            return Poll::Pending;
        }
        this.done = true;
        Poll::Ready(Ok(this.outputs.iter_mut().filter_map(Option::take).collect()))
    }
}

impl<F: Future> FusedFuture for JoinCancellable<F> {
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<F: CancellableFuture> CancellableFuture for JoinCancellable<F> {
    fn cancel(&self) {
        for future in &self.futures {
            future.as_ref().get_ref().cancel();
        }
    }
}
