//! What every part of the expansion writes: the path to limiter-tower's
//! items, and the values as written, as Rust expressions that keep their
//! spans.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};

use crate::parse::{DurationLit, Int};

/// Where the generated code finds what it calls.
pub(crate) fn private() -> TokenStream {
    quote!(::limiter_tower::__private)
}

impl ToTokens for Int {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let mut literal = Literal::u64_unsuffixed(self.value);
        literal.set_span(self.lit.span());
        literal.to_tokens(tokens);
    }
}

impl ToTokens for DurationLit {
    /// The same `Duration`, in whole seconds when it is.
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let span = self.written.clone().into_iter().next().map(|t| t.span());
        let span = span.unwrap_or_else(Span::call_site);
        let ms = self.value.as_millis() as u64;
        let duration = if ms.is_multiple_of(1_000) {
            let secs = Literal::u64_unsuffixed(ms / 1_000);
            quote_spanned!(span=> ::core::time::Duration::from_secs(#secs))
        } else {
            let ms = Literal::u64_unsuffixed(ms);
            quote_spanned!(span=> ::core::time::Duration::from_millis(#ms))
        };
        duration.to_tokens(tokens);
    }
}
