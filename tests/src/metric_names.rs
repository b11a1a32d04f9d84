//! The metrics the code exports, read from the `metrics` macros in the
//! crates' sources, and the metrics and labels a PromQL query names: what
//! keeps the dashboard and the operations guide from drifting from the code.
//!
//! Written by hand: the queries use a small part of PromQL (selectors,
//! `by (…)` clauses, functions, `label_values`), and no maintained crate
//! parses both PromQL and Rust macro arguments for this.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// A metric the code exports: its type and every label any of its
/// macro calls gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Every label key of its calls.
    pub labels: BTreeSet<String>,
}

/// A metric a query names: the exported name, and whether it named the
/// histogram's `_bucket` series (which carry the `le` label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricRef {
    /// The name the code exports.
    pub name: String,
    /// Whether the query read its `_bucket` series.
    pub bucket: bool,
}

const MACROS: [&str; 3] = ["counter", "gauge", "histogram"];

/// Every metric exported by the crates `limiter-*` under `workspace`.
pub fn exported(workspace: &Path) -> BTreeMap<String, Exported> {
    let mut metrics = BTreeMap::new();
    let mut files = Vec::new();
    for entry in fs::read_dir(workspace).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("limiter-") {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    for file in files {
        let source = fs::read_to_string(&file).unwrap();
        for (name, kind, labels) in macro_calls(&source) {
            let metric = metrics.entry(name.clone()).or_insert_with(|| Exported {
                kind,
                labels: BTreeSet::new(),
            });
            assert_eq!(metric.kind, kind, "{name} exported as two types");
            metric.labels.extend(labels);
        }
    }
    metrics
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The metric calls of one source file: name (a literal, or a `const` of
/// the file), type and labels.
fn macro_calls(source: &str) -> Vec<(String, &'static str, Vec<String>)> {
    let mut calls = Vec::new();
    for kind in MACROS {
        let pattern = format!("{kind}!(");
        let mut from = 0;
        while let Some(at) = source[from..].find(&pattern) {
            let start = from + at + pattern.len();
            from = start;
            let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
            if source[line_start..start].trim_start().starts_with("//") {
                continue;
            }
            let args = &source[start..start + closing_paren(&source[start..])];
            let first = args.split(',').next().unwrap_or_default().trim();
            let name = match string_literal(first) {
                Some(name) => name.to_owned(),
                None => match const_value(source, first) {
                    Some(name) => name,
                    None => continue,
                },
            };
            if name.starts_with("limiter_") {
                calls.push((name, kind, label_keys(args)));
            }
        }
    }
    calls
}

/// The offset of the `)` that closes a group opened just before `text`.
fn closing_paren(text: &str) -> usize {
    let mut depth = 1;
    let mut in_string = false;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        previous = c;
    }
    text.len()
}

fn string_literal(text: &str) -> Option<&str> {
    text.strip_prefix('"')?.strip_suffix('"')
}

/// The value of `const NAME: &str = "…";` in `source`.
fn const_value(source: &str, name: &str) -> Option<String> {
    let declaration = format!("const {name}: &str = \"");
    let at = source.find(&declaration)? + declaration.len();
    let end = source[at..].find('"')?;
    Some(source[at..at + end].to_owned())
}

/// The keys of the `"key" => value` pairs of a macro call.
fn label_keys(args: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut rest = args;
    while let Some(arrow) = rest.find("=>") {
        let before = rest[..arrow].trim_end();
        if let Some(key) = before.strip_suffix('"')
            && let Some(open) = key.rfind('"')
        {
            keys.push(key[open + 1..].to_owned());
        }
        rest = &rest[arrow + 2..];
    }
    keys
}

/// Every metric `query` names with the labels it reads of it: those of its
/// selector, of the `by`/`without` clauses of the aggregations around it,
/// and of `label_values(metric, label)`. A name the code does not export
/// (as itself or as a histogram's `_bucket`, `_sum` or `_count`) is an error.
pub fn metrics_in_query(
    query: &str,
    code: &BTreeMap<String, Exported>,
) -> Result<Vec<(MetricRef, BTreeSet<String>)>, String> {
    let tokens = tokenize(query);
    let mut used: Vec<(MetricRef, BTreeSet<String>, usize)> = Vec::new();
    // Per metric: its token index, so clauses can reach the ones in scope.
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(word) if word.starts_with("limiter_") => {
                let metric = resolve(word, code)?;
                let mut labels = BTreeSet::new();
                if tokens.get(i + 1) == Some(&Token::Open('{')) {
                    let (names, next) = matchers(&tokens, i + 2);
                    labels.extend(names);
                    // label_values(metric{…}, label)
                    if i >= 2
                        && tokens[i - 1] == Token::Open('(')
                        && tokens[i - 2] == Token::Word("label_values".into())
                    {
                        labels.extend(label_values_label(&tokens, next));
                    }
                    used.push((metric, labels, i));
                    i = next;
                    continue;
                }
                if i >= 2
                    && tokens[i - 1] == Token::Open('(')
                    && tokens[i - 2] == Token::Word("label_values".into())
                {
                    labels.extend(label_values_label(&tokens, i + 1));
                }
                used.push((metric, labels, i));
            }
            Token::Word(word) if word == "by" || word == "without" => {
                let (names, after) = label_list(&tokens, i + 1)?;
                // `agg by (…) (expr)`, or `agg (expr) by (…)`.
                let scope = if tokens.get(after) == Some(&Token::Open('(')) {
                    after..group_end(&tokens, after)
                } else {
                    group_start(&tokens, i - 1)..i
                };
                for (_, labels, at) in &mut used {
                    if scope.contains(at) {
                        labels.extend(names.iter().cloned());
                    }
                }
                // Metrics after the clause, inside its scope, get the labels
                // when they are met: remember the clause for them.
                pending_scopes(&tokens, scope, &names, &mut used, code)?;
                i = after;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let mut seen: Vec<(MetricRef, BTreeSet<String>)> = Vec::new();
    for (metric, labels, _) in used {
        match seen.iter_mut().find(|(m, _)| *m == metric) {
            Some((_, all)) => all.extend(labels),
            None => seen.push((metric, labels)),
        }
    }
    Ok(seen)
}

/// Adds a clause's labels to the metrics inside its scope that come after
/// the clause (`sum by (le) (rate(x_bucket[1m]))`): they are read here,
/// ahead of the main scan, and merged when the scan meets them.
fn pending_scopes(
    tokens: &[Token],
    scope: std::ops::Range<usize>,
    names: &[String],
    used: &mut Vec<(MetricRef, BTreeSet<String>, usize)>,
    code: &BTreeMap<String, Exported>,
) -> Result<(), String> {
    for at in scope {
        if let Token::Word(word) = &tokens[at]
            && word.starts_with("limiter_")
            && !used.iter().any(|(_, _, i)| *i == at)
        {
            let metric = resolve(word, code)?;
            used.push((metric, names.iter().cloned().collect(), at));
        }
    }
    Ok(())
}

fn resolve(word: &str, code: &BTreeMap<String, Exported>) -> Result<MetricRef, String> {
    if code.contains_key(word) {
        return Ok(MetricRef {
            name: word.to_owned(),
            bucket: false,
        });
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = word.strip_suffix(suffix)
            && code.get(base).is_some_and(|m| m.kind == "histogram")
        {
            return Ok(MetricRef {
                name: base.to_owned(),
                bucket: suffix == "_bucket",
            });
        }
    }
    Err(format!("{word} is not exported"))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Open(char),
    Close(char),
    Comma,
    /// Operators, numbers, strings and durations: read past.
    Other,
}

fn tokenize(query: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut previous = c;
                for next in chars.by_ref() {
                    if next == '"' && previous != '\\' {
                        break;
                    }
                    previous = next;
                }
                tokens.push(Token::Other);
            }
            // A range: `[5m]`, `[$__rate_interval]`.
            '[' => {
                for next in chars.by_ref() {
                    if next == ']' {
                        break;
                    }
                }
                tokens.push(Token::Other);
            }
            '(' | '{' => tokens.push(Token::Open(c)),
            ')' | '}' => tokens.push(Token::Close(c)),
            ',' => tokens.push(Token::Comma),
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let mut word = c.to_string();
                while let Some(&next) = chars.peek() {
                    if next.is_ascii_alphanumeric() || next == '_' || next == ':' {
                        word.push(next);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Word(word));
            }
            c if c.is_whitespace() => {}
            _ => tokens.push(Token::Other),
        }
    }
    tokens
}

/// The label names of a selector's matchers from `at` to its `}`, and the
/// index after it.
fn matchers(tokens: &[Token], mut at: usize) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut expect_name = true;
    while at < tokens.len() {
        match &tokens[at] {
            Token::Close('}') => return (names, at + 1),
            Token::Word(w) if expect_name => {
                names.push(w.clone());
                expect_name = false;
            }
            Token::Comma => expect_name = true,
            _ => {}
        }
        at += 1;
    }
    (names, at)
}

/// The labels of `(a, b)` at `at`, and the index after the `)`.
fn label_list(tokens: &[Token], at: usize) -> Result<(Vec<String>, usize), String> {
    if tokens.get(at) != Some(&Token::Open('(')) {
        return Err("a by/without clause without its labels".into());
    }
    let mut names = Vec::new();
    let mut i = at + 1;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(w) => names.push(w.clone()),
            Token::Close(')') => return Ok((names, i + 1)),
            _ => {}
        }
        i += 1;
    }
    Err("an unclosed label list".into())
}

/// The label of `label_values(metric, label)` after the metric (at `at`).
fn label_values_label(tokens: &[Token], at: usize) -> Option<String> {
    match (tokens.get(at), tokens.get(at + 1)) {
        (Some(Token::Comma), Some(Token::Word(label))) => Some(label.clone()),
        _ => None,
    }
}

/// The index after the group opened at `open`.
fn group_end(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::Open('(') => depth += 1,
            Token::Close(')') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index of the `(` that opens the group closed at `close`.
fn group_start(tokens: &[Token], close: usize) -> usize {
    let mut depth = 0;
    for i in (0..=close).rev() {
        match tokens[i] {
            Token::Close(')') => depth += 1,
            Token::Open('(') => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    0
}
