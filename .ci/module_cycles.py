"""Groups of modules that import each other inside each library crate.

A node is a module file (crate::a::b); an edge is a path (`use` or in
code) through `crate::`, `super::` or `self::` naming another module of
the same crate, a name the crate root re-exports counting as the module
that defines it. A child naming its parent is no edge. Test modules and
`#[cfg(test)]` blocks are left out. Prints each group; exits 1 if any.

Usage: python3 .ci/module_cycles.py limiter-core limiter-redis ...
Written by hand: no maintained tool reads Rust module edges offline."""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"): continue
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"): rel = rel[:-1]
            name = "::".join(rel)
            if re.search(r"(^|::)tests?$|_tests$", name): continue
            mods[name] = p
    return mods

def strip_tests(text):
    # drop #[cfg(test)] mod ... { } blocks
    out, i = [], 0
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{", text[i:])
        if not m: out.append(text[i:]); break
        out.append(text[i:i+m.start()])
        j = i + m.end(); depth = 1
        while depth and j < len(text):
            if text[j] == "{": depth += 1
            elif text[j] == "}": depth -= 1
            j += 1
        i = j
    text = "".join(out)
    text = re.sub(r"//[^\n]*", "", text)
    return text

REEXPORTS = {}

def resolve(mod, path, mods):
    parts = path.split("::")
    # a name the crate root re-exports from one of its modules
    if len(parts) >= 2 and (parts[0] == "crate" or (parts[0] == "super" and mod.count("::") == 0 and mod)):
        target = REEXPORTS.get(parts[1])
        if target:
            return target if target != mod else None
    base = mod.split("::") if mod else []
    if parts[0] == "crate": cur = []; parts = parts[1:]
    elif parts[0] == "self": cur = base[:]; parts = parts[1:]
    elif parts[0] == "super":
        cur = base[:]
        while parts and parts[0] == "super":
            cur = cur[:-1]; parts = parts[1:]
    else: return None
    best = None
    for k in range(len(parts)+1):
        cand = "::".join(cur + parts[:k])
        if cand in mods: best = cand
    return best

def expand_use(stmt):
    # expand nested braces into full paths
    stmt = re.sub(r"\s+", "", stmt)
    def exp(prefix, s):
        res = []
        depth, start, items = 0, 0, []
        for i,c in enumerate(s):
            if c == "{": depth += 1
            elif c == "}": depth -= 1
            elif c == "," and depth == 0: items.append(s[start:i]); start = i+1
        items.append(s[start:])
        for it in items:
            if not it: continue
            m = re.match(r"^(.*?)::\{(.*)\}$", it)
            if m: res += exp(prefix + m.group(1) + "::", m.group(2))
            else: res.append(prefix + it)
        return res
    return exp("", stmt)

def graph(src):
    mods = modules(src)
    REEXPORTS.clear()
    root = mods.get("")
    if root:
        text = strip_tests(open(root).read())
        for m in re.finditer(r"\bpub(?:\(crate\))?\s+use\s+([^;]+);", text):
            for full in expand_use(m.group(1)):
                parts = full.split("::")
                if parts[0] in mods and len(parts) == 2:
                    name = re.sub(r"as\w+$", "", parts[1])
                    REEXPORTS[name] = parts[0]
    g = defaultdict(set)
    for mod, p in mods.items():
        text = strip_tests(open(p).read())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            for full in expand_use(m.group(1)):
                full = re.sub(r"\bas\s*\w+$", "", full)
                paths.append(full)
        paths += re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", text)
        for path in paths:
            if not re.match(r"^(crate|super|self)\b", path): continue
            t = resolve(mod, path, mods)
            if t is not None and t != mod and not mod.startswith(t + "::") and not (t == "" ):
                g[mod].add(t)
    return mods, g

def sccs(nodes, g):
    index, low, st, on, res, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: res.append(sorted(comp))
    for v in nodes:
        if v not in index: visit(v)
    return res

total = 0
for crate in sys.argv[1:]:
    mods, g = graph(os.path.join(crate, "src"))
    comps = sccs(list(mods), g)
    total += len(comps)
    print(f"{crate}: {len(comps)} cycle groups")
    for comp in comps:
        edges = sum(1 for a in comp for b in g[a] if b in comp)
        print(f"   {len(comp)} modules, {edges} edges: {', '.join(c or 'lib' for c in comp)}")
print("total", total)
sys.exit(1 if total else 0)

