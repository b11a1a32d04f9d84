//! How a limit finds the router layer above it: a thread-local set while the
//! router layer calls and polls what is below it, not a request extension,
//! which would cost every request an `Arc` clone, a box, a map insert and
//! their frees (about 290 instructions; see
//! [`LimiterLayer`](crate::LimiterLayer)).

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::context::Context;

/// A context as the thread-local holds it. The thread-local needs no
/// destructor (so no registration to check on each access): every scope puts
/// back the context it found, so the thread ends with none.
type InScope = Option<ManuallyDrop<Arc<Context>>>;

thread_local! {
    /// The context of the innermost [`LimiterLayer`](crate::LimiterLayer)
    /// calling or polling on this thread.
    static IN_SCOPE: Cell<InScope> = const { Cell::new(None) };
}

fn hold(context: Option<Arc<Context>>) -> InScope {
    context.map(ManuallyDrop::new)
}

fn release(held: InScope) -> Option<Arc<Context>> {
    held.map(ManuallyDrop::into_inner)
}

/// Whether this process has made a [`LimiterLayer`](crate::LimiterLayer):
/// a limit that finds none in scope then knows the application has one, but
/// not above this route. (Made, not applied: axum applies a router's layers
/// to handler routes only when it is served.)
static LAYER_EXISTS: AtomicBool = AtomicBool::new(false);

pub(crate) fn note_layer_exists() {
    LAYER_EXISTS.store(true, Ordering::Relaxed);
}

pub(crate) fn layer_exists() -> bool {
    LAYER_EXISTS.load(Ordering::Relaxed)
}

/// A router layer's context in scope on this thread, for the limits its
/// service calls or polls, until [`leave`](Self::leave) (or a panic) puts
/// back the scope around it: an outer router layer's, or none. The context
/// moves into the thread-local and back: no reference count changes.
pub(crate) struct Scope {
    /// The scope around this one, until it is put back.
    outer: Option<InScope>,
}

impl Scope {
    #[inline]
    pub(crate) fn enter(context: Arc<Context>) -> Self {
        Self {
            outer: Some(IN_SCOPE.replace(hold(Some(context)))),
        }
    }

    /// Ends the scope, handing the context back.
    #[inline]
    pub(crate) fn leave(mut self) -> Option<Arc<Context>> {
        let outer = self.outer.take().flatten();
        release(IN_SCOPE.replace(outer))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        // Unwinding: put the outer scope back, and drop this one's context.
        if let Some(outer) = self.outer.take() {
            drop(release(IN_SCOPE.replace(outer)));
        }
    }
}

/// The context in scope, taken for one limit's check and put back when
/// dropped. The inner service must not be called meanwhile: the scope is
/// empty.
pub(crate) struct Current(Option<Arc<Context>>);

impl Current {
    #[inline]
    pub(crate) fn take() -> Self {
        Self(release(IN_SCOPE.take()))
    }

    #[inline]
    pub(crate) fn context(&self) -> Option<&Arc<Context>> {
        self.0.as_ref()
    }
}

impl Drop for Current {
    #[inline]
    fn drop(&mut self) {
        IN_SCOPE.set(hold(self.0.take()));
    }
}
