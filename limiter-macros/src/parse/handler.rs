//! The annotated function: what makes it a handler the attribute can wrap,
//! and the parts the generated code reuses.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens as _;
use syn::{Attribute, Error, FnArg, ItemFn, Signature, Token, Type, Visibility};

use crate::parse::syntax::combine;

/// A free `async fn` that can become a handler type.
pub(crate) struct Handler {
    /// On the handler type: docs, `deprecated`, `cfg` and lint levels.
    pub(crate) attrs_on_type: Vec<Attribute>,
    /// On the items beside the type: `cfg` and lint levels.
    pub(crate) attrs_on_items: Vec<Attribute>,
    /// On the function itself: everything else (other attribute macros,
    /// `expect`, `must_use`...).
    pub(crate) attrs_on_fn: Vec<Attribute>,
    pub(crate) vis: Visibility,
    /// Always `async`: a missing `async` is reported, then assumed.
    pub(crate) sig: Signature,
    pub(crate) block: Box<syn::Block>,
    /// The extractor types, in order.
    pub(crate) arg_types: Vec<Type>,
}

impl Handler {
    /// The handler, or every reason `item` cannot be one.
    pub(crate) fn parse(item: TokenStream) -> syn::Result<Self> {
        let (handler, errors) = Self::parse_recovering(item)?;
        match combine(errors) {
            Some(errors) => Err(errors),
            None => Ok(handler),
        }
    }

    /// The handler with the mistakes it can be generated despite (a missing
    /// `async`), and those mistakes; or the mistakes that leave nothing to
    /// generate.
    pub(crate) fn parse_recovering(item: TokenStream) -> syn::Result<(Self, Vec<Error>)> {
        let item = syn::parse2::<ItemFn>(item).map_err(|_| {
            Error::new(
                Span::call_site(),
                "`#[rate_limit]` goes on an `async fn` handler",
            )
        })?;
        let mut sig = item.sig;
        if let Some(errors) = combine(fatal_mistakes(&sig)) {
            return Err(errors);
        }
        let mut recoverable = Vec::new();
        if sig.asyncness.is_none() {
            recoverable.push(Error::new_spanned(
                sig.fn_token,
                "`#[rate_limit]` handlers must be `async fn`",
            ));
            sig.asyncness = Some(Token![async](sig.fn_token.span));
        }
        let arg_types = sig
            .inputs
            .iter()
            .filter_map(|input| match input {
                FnArg::Typed(arg) => Some((*arg.ty).clone()),
                FnArg::Receiver(_) => None,
            })
            .collect();
        // A second `#[rate_limit]` below this one: one error, on it, and
        // the handler generated without it.
        let (again, attrs): (Vec<Attribute>, Vec<Attribute>) =
            item.attrs.into_iter().partition(|attr| {
                let last = attr.path().segments.last();
                last.is_some_and(|segment| segment.ident == "rate_limit")
            });
        for attr in again {
            recoverable.push(Error::new_spanned(
                attr,
                "one `#[rate_limit]` per handler: put the second limit on the route, as a \
                 `LimitLayer`: `.route(\"/path\", post(handler).layer(LimitLayer::new(\"name\", \
                 policy, KeySource::user())))`",
            ));
        }
        let (attrs_on_type, attrs_on_items, attrs_on_fn) = split_attrs(attrs);
        let handler = Self {
            attrs_on_type,
            attrs_on_items,
            attrs_on_fn,
            vis: item.vis,
            sig,
            block: item.block,
            arg_types,
        };
        Ok((handler, recoverable))
    }

    /// Whether the handler reads the [`Decision`]: an argument's type names
    /// it (as in `Extension<Decision>`), so the limit puts it into the
    /// request. Other handlers do not pay for it.
    ///
    /// [`Decision`]: https://docs.rs/limiter-model/latest/limiter_core/struct.Decision.html
    pub(crate) fn takes_decision(&self) -> bool {
        fn names_decision(tokens: TokenStream) -> bool {
            tokens.into_iter().any(|token| match token {
                TokenTree::Ident(ident) => ident == "Decision",
                TokenTree::Group(group) => names_decision(group.stream()),
                _ => false,
            })
        }
        self.arg_types
            .iter()
            .any(|ty| names_decision(ty.to_token_stream()))
    }
}

/// Signatures no handler type can be generated for, one error each.
fn fatal_mistakes(sig: &Signature) -> Vec<Error> {
    let mut errors = Vec::new();
    if let Some(unsafety) = sig.unsafety {
        errors.push(Error::new_spanned(
            unsafety,
            "`#[rate_limit]` handlers cannot be `unsafe`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(Error::new_spanned(
            abi,
            "`#[rate_limit]` handlers cannot have an `extern` ABI",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(Error::new_spanned(
            &sig.generics,
            "`#[rate_limit]` handlers cannot be generic: the handler type needs concrete extractor types",
        ));
    }
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => errors.push(Error::new_spanned(
                receiver,
                "`#[rate_limit]` handlers cannot take `self`: write a free `async fn`",
            )),
            FnArg::Typed(arg) => {
                if let Type::ImplTrait(ty) = &*arg.ty {
                    errors.push(Error::new_spanned(
                        ty,
                        "`#[rate_limit]` handlers cannot take `impl Trait`: name the extractor type",
                    ));
                }
            }
        }
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(Error::new_spanned(
            variadic,
            "`#[rate_limit]` handlers cannot be variadic",
        ));
    }
    errors
}

/// Sorts the function's attributes: (on the type, on the items beside it,
/// on the function).
fn split_attrs(attrs: Vec<Attribute>) -> (Vec<Attribute>, Vec<Attribute>, Vec<Attribute>) {
    let (mut on_type, mut on_items, mut on_fn) = (Vec::new(), Vec::new(), Vec::new());
    for attr in attrs {
        let path = attr.path();
        if path.is_ident("doc") || path.is_ident("deprecated") {
            on_type.push(attr);
        } else if ["cfg", "allow", "warn", "deny", "forbid"]
            .iter()
            .any(|name| path.is_ident(name))
        {
            on_type.push(attr.clone());
            on_items.push(attr);
        } else {
            on_fn.push(attr);
        }
    }
    (on_type, on_items, on_fn)
}
