//! [`block_on`]: the single-threaded executor that runs one rank.
//!
//! A rank's collective is one future (its concurrency comes from joined
//! futures, not threads). The executor polls it when it was woken, and in
//! between lets the transport make progress: shared memory has no way to
//! wake another process, so its progress function polls the rings; TCP's
//! reader threads deliver into the [`Mailbox`](crate::Mailbox) and wake the
//! executor themselves. When nothing moves the executor spins briefly (the
//! lowest latency on an idle core), then yields the core, then parks for
//! short periods, as MPI libraries do when oversubscribed.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// How the executor waits when neither the future nor the transport moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdlePolicy {
    /// Idle rounds spent spinning before yielding the core.
    pub spin: u32,
    /// Idle rounds spent yielding before parking.
    pub yields: u32,
    /// How long to park each round after that (a waker ends it early).
    pub park: Duration,
}

impl Default for IdlePolicy {
    /// Spin 2000 rounds, yield 2000, then park 200 us at a time.
    fn default() -> Self {
        IdlePolicy {
            spin: 2000,
            yields: 2000,
            park: Duration::from_micros(200),
        }
    }
}

/// Wakes the executor's thread.
struct ThreadWaker {
    /// Woken from another thread (then also unparked).
    woken: AtomicBool,
    /// Woken from the executor's own thread (a transport's progress
    /// delivering a message): only that thread stores and loads it, so
    /// plain loads and stores do, where `woken` takes an atomic swap (a
    /// locked instruction) to consume.
    woken_here: AtomicBool,
    thread: Thread,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Woken from the executor's own thread (a transport's progress
        // delivering a message): it is running, not parked, and sees the
        // flag on its next round; no unpark (an atomic swap) needed, and
        // the flag is its own (no swap to consume it either).
        let own = RUNNING
            .try_with(|r| std::ptr::eq(r.get(), Arc::as_ptr(self)))
            .unwrap_or(false);
        if own {
            self.woken_here.store(true, Ordering::Relaxed);
            return;
        }
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

thread_local! {
    /// This thread's waker, kept between calls of [`block_on`]: a rank
    /// runs one collective call after another, and a waker made per call
    /// (an allocation and the thread's handle) costs more than a small
    /// call's work. `None` while a `block_on` of this thread holds it.
    static SIGNAL: RefCell<Option<(Arc<ThreadWaker>, Waker)>> = const { RefCell::new(None) };

    /// The waker of the [`block_on`] running on this thread (null: none),
    /// so that a wake-up from the thread itself skips the unpark.
    static RUNNING: Cell<*const ThreadWaker> = const { Cell::new(std::ptr::null()) };
}

/// This thread's waker ([`SIGNAL`]), or a new one if it is in use.
fn take_signal() -> (Arc<ThreadWaker>, Waker) {
    SIGNAL.with(|s| s.borrow_mut().take()).unwrap_or_else(|| {
        let signal = Arc::new(ThreadWaker {
            woken: AtomicBool::new(true),
            woken_here: AtomicBool::new(false),
            thread: thread::current(),
        });
        let waker = Waker::from(signal.clone());
        (signal, waker)
    })
}

/// Hands the waker back for the next [`block_on`] of this thread, and
/// restores the [`RUNNING`] of an enclosing one.
struct PutBack(Option<(Arc<ThreadWaker>, Waker)>, *const ThreadWaker);

impl Drop for PutBack {
    fn drop(&mut self) {
        let _ = RUNNING.try_with(|r| r.set(self.1));
        let kept = self.0.take();
        // During thread teardown the slot may be gone: then drop the waker.
        let _ = SIGNAL.try_with(|s| {
            if let Ok(mut slot) = s.try_borrow_mut() {
                *slot = kept;
            }
        });
    }
}

/// Runs `fut` to completion on this thread. `progress` is called whenever
/// the future is pending; it drives the transport and returns whether
/// anything moved (then the future is polled again at once).
pub fn block_on<T>(
    fut: impl Future<Output = T>,
    mut progress: impl FnMut() -> bool,
    policy: IdlePolicy,
) -> T {
    // Handed back when this function returns (or unwinds).
    let signal = take_signal();
    let outer = RUNNING.with(|r| r.replace(Arc::as_ptr(&signal.0)));
    let kept = PutBack(Some(signal), outer);
    let (signal, waker) = kept.0.as_ref().expect("taken above");
    // A waker kept from an earlier call may have been woken since (a stale
    // wake-up costs one poll); the first poll happens regardless.
    signal.woken.store(true, Ordering::Release);
    let mut cx = Context::from_waker(waker);
    let mut fut = pin!(fut);
    let mut idle: u64 = 0;
    loop {
        // Loads first: an idle round then costs no atomic swap, nor does
        // a wake-up from this thread.
        let here = signal.woken_here.load(Ordering::Relaxed);
        if here {
            signal.woken_here.store(false, Ordering::Relaxed);
        }
        if here
            || (signal.woken.load(Ordering::Relaxed) && signal.woken.swap(false, Ordering::AcqRel))
        {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
            idle = 0;
        }
        if progress() {
            // Whatever moved may have woken the future; poll it if so.
            idle = 0;
            continue;
        }
        if signal.woken_here.load(Ordering::Relaxed) || signal.woken.load(Ordering::Relaxed) {
            // Woken during this round, maybe from this thread (which does
            // not unpark): poll before any wait.
            continue;
        }
        idle += 1;
        if idle <= u64::from(policy.spin) {
            std::hint::spin_loop();
        } else if idle <= u64::from(policy.spin) + u64::from(policy.yields) {
            thread::yield_now();
        } else {
            thread::park_timeout(policy.park);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::task::Poll;

    #[test]
    fn progress_drives_a_future_to_completion() {
        let steps = Cell::new(0);
        let fut = std::future::poll_fn(|cx| {
            if steps.get() >= 5 {
                Poll::Ready(steps.get())
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        });
        let out = block_on(
            fut,
            || {
                steps.set(steps.get() + 1);
                true
            },
            IdlePolicy::default(),
        );
        assert_eq!(out, 5);
    }

    #[test]
    fn a_wake_up_from_the_transport_on_the_same_thread_is_seen_without_unpark() {
        // The progress function wakes the future from the executor's own
        // thread, as a shared-memory delivery does; the executor must then
        // poll again rather than park (a lost wake-up would park for the
        // whole minute).
        let waker: RefCell<Option<Waker>> = RefCell::new(None);
        let ready = Cell::new(false);
        let start = std::time::Instant::now();
        let fut = std::future::poll_fn(|cx| {
            if ready.get() {
                return Poll::Ready(());
            }
            *waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        });
        block_on(
            fut,
            || {
                if let Some(w) = waker.borrow_mut().take() {
                    ready.set(true);
                    w.wake();
                }
                false
            },
            IdlePolicy {
                spin: 0,
                yields: 0,
                park: Duration::from_secs(60),
            },
        );
        assert!(start.elapsed() < Duration::from_secs(30));
        // No block_on runs now: a wake-up unparks again.
        assert!(RUNNING.with(|r| r.get().is_null()));
    }

    #[test]
    fn a_waker_from_another_thread_ends_the_wait() {
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let helper = thread::spawn(move || {
            let w = rx.recv().unwrap();
            thread::sleep(Duration::from_millis(20));
            d2.store(true, Ordering::Release);
            w.wake();
        });
        let mut sent = false;
        let fut = std::future::poll_fn(|cx| {
            if done.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            if !sent {
                tx.send(cx.waker().clone()).unwrap();
                sent = true;
            }
            Poll::Pending
        });
        block_on(
            fut,
            || false,
            IdlePolicy {
                spin: 1,
                yields: 1,
                park: Duration::from_secs(60),
            },
        );
        helper.join().unwrap();
    }
}
