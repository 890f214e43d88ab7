//! The one thread that owns the allocation engine. It is started with dra-cel's large stack, so
//! CEL selectors compile and evaluate inline on the same deep stack (an ordinary 2 MiB async
//! worker would overflow on an expression nested as deeply as the API allows, and every
//! evaluation elsewhere would need a thread of its own).
//!
//! Watch events and a round's calls run on it one after another, in the order sent. The queue is
//! short ([`QUEUE`]): a watch that delivers faster than the engine applies (a first list of
//! thousands of slices) waits, instead of holding whole objects in memory. A panic in
//! any of them (the `cel` crate panics on some inputs) is caught: the engine recounts what is in
//! use ([`Allocator::recover`](dra_allocator::Allocator::recover)) and the caller gets
//! [`EnginePanic`], so it costs the one claim being allocated, never the process.

use std::panic::{AssertUnwindSafe, catch_unwind};
use tokio::sync::{mpsc, oneshot};

use crate::engine_feed::EngineFeed;

type Job = Box<dyn FnOnce(&mut EngineFeed) + Send>;

/// Jobs queued for the engine at most; a sender waits beyond that.
pub const QUEUE: usize = 16;

/// A panic while the engine worked, with its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the allocation engine panicked: {0}")]
pub struct EnginePanic(pub String);

/// Sends work to the engine's thread. Clones share the thread; it ends when the last one drops.
#[derive(Clone)]
pub struct EngineThread {
    jobs: mpsc::Sender<Job>,
}

impl EngineThread {
    /// Starts the thread with an empty engine.
    pub fn start() -> std::io::Result<EngineThread> {
        let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE);
        dra_cel::spawn_deep_stack("allocation-engine", move || {
            let mut feed = EngineFeed::default();
            while let Some(job) = queue.blocking_recv() {
                job(&mut feed);
            }
        })?;
        Ok(EngineThread { jobs })
    }

    /// Queues `work` (a watch event) without waiting for it to run (only for room in the queue);
    /// a panic in it is logged.
    pub async fn send(&self, work: impl FnOnce(&mut EngineFeed) + Send + 'static) {
        let job: Job = Box::new(move |feed| {
            if let Err(panic) = caught(feed, work) {
                tracing::error!(%panic, "applying a watch event");
            }
        });
        if self.jobs.send(job).await.is_err() {
            tracing::error!("the allocation engine thread is gone");
        }
    }

    /// Runs `work` on the engine and returns its result, or the panic that ended it.
    pub async fn call<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut EngineFeed) -> T + Send + 'static,
    ) -> Result<T, EnginePanic> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |feed| {
            let _ = reply.send(caught(feed, work));
        });
        self.jobs
            .send(job)
            .await
            .map_err(|_| EnginePanic("the engine thread is gone".into()))?;
        answer
            .await
            .map_err(|_| EnginePanic("the engine thread is gone".into()))?
    }
}

/// Runs `work`, turning a panic into [`EnginePanic`] after the engine recovered from it.
pub fn caught<T>(feed: &mut EngineFeed, work: impl FnOnce(&mut EngineFeed) -> T) -> Result<T, EnginePanic> {
    match catch_unwind(AssertUnwindSafe(|| work(feed))) {
        Ok(value) => Ok(value),
        Err(payload) => {
            feed.engine.recover();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(EnginePanic(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{claim, device_classes, slices};
    use kube::runtime::watcher::Event;

    #[tokio::test]
    async fn work_runs_on_the_deep_stack_thread() {
        let engine = EngineThread::start().unwrap();
        let (name, deep) = engine
            .call(|_| {
                (
                    std::thread::current().name().map(str::to_owned),
                    dra_cel::on_deep_stack_thread(),
                )
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("allocation-engine"));
        assert!(deep, "CEL compiles and evaluates inline on this thread");
    }

    #[tokio::test]
    async fn a_panic_costs_the_call_not_the_engine() {
        let engine = EngineThread::start().unwrap();
        for class in device_classes() {
            engine.send(move |feed| feed.class_event(Event::Apply(class))).await;
        }
        for slice in slices("n1", 1) {
            engine.send(move |feed| feed.slice_event(Event::Apply(slice))).await;
        }
        engine.send(|_| panic!("inside a watch event")).await;
        let failed = engine
            .call(|feed| {
                let _ = feed.engine.allocate(&claim("a", "gpu-physical", 1, 1), None);
                panic!("inside cel");
            })
            .await;
        assert_eq!(failed, Err(EnginePanic("inside cel".into())));
        let after = engine
            .call(|feed| {
                feed.engine
                    .allocate(&claim("b", "gpu-physical", 1, 1), None)
                    .map(|a| a.is_some())
            })
            .await
            .unwrap();
        assert_eq!(
            after,
            Ok(true),
            "the engine still serves the next claim, with nothing held"
        );
    }
}
