#!/usr/bin/env python3
"""Finds import cycles between the modules of each crate.

A module is a file (`a.rs`) or a folder (`a/mod.rs` with its files). Every `crate::` and `super::`
path outside test modules is an edge from the module it is written in to the module it names.
Edges between a module and its own ancestors are left out: a folder's `mod.rs` and its files are
one layer. The rest are compared at the level where the two paths part, so `lake/compact.rs`
naming `crate::lake::delta` is an edge compact -> delta inside `lake/`, and `pipeline/writer/x.rs`
naming `crate::memory` is an edge pipeline -> memory at the crate root.

Prints each folder's modules in an order where every module comes after the ones it uses, and
every cycle found. Exits 1 when there is a cycle.

    scripts/check-cycles.py            # every crate under crates/
    scripts/check-cycles.py crates/core
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

PATH = re.compile(r"\b(crate|super)::((?:\w+::)*)(\{|\w+)")


def module_of(src: Path, file: Path) -> tuple:
    """The module path of a source file: `lake/mod.rs` -> ("lake",), `lake/delta.rs` -> ("lake", "delta")."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def exists(src: Path, module: tuple) -> bool:
    if not module:
        return True
    base = src.joinpath(*module)
    return base.with_suffix(".rs").exists() or (base / "mod.rs").exists()


def resolve(src: Path, segments: list) -> tuple:
    """The deepest module a path names; what follows is an item in it."""
    module = ()
    for segment in segments:
        if exists(src, module + (segment,)):
            module += (segment,)
        else:
            break
    return module


def code_of(text: str) -> str:
    """The file's code before its `#[cfg(test)] mod tests`, without comments: a doc link is not
    an import."""
    match = re.search(r"#\[cfg\(test\)\]\s*mod \w+", text)
    code = text[: match.start()] if match else text
    return re.sub(r"//.*", "", code)


def use_trees(text: str):
    """Yields (root, segments) for every path in the text, brace groups expanded."""
    for match in PATH.finditer(text):
        root, prefix, last = match.group(1), match.group(2), match.group(3)
        segments = [s for s in prefix.split("::") if s]
        if last != "{":
            yield root, segments + [last]
            continue
        # A group: take the first segment of each item at its top level.
        depth, start, items = 1, match.end(), []
        i = start
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            if depth == 1 and text[i] == "," or depth == 0:
                items.append(text[start:i])
                start = i + 1
            i += 1
        for item in items:
            first = re.match(r"\s*(\w+)", item)
            if first and first.group(1) != "self":
                yield root, segments + [first.group(1)]
            elif first:
                yield root, segments


def edges_of(src: Path):
    """(level, from, to) for every edge between two modules of one folder."""
    found = set()
    for file in sorted(src.rglob("*.rs")):
        here = module_of(src, file)
        for root, segments in use_trees(code_of(file.read_text())):
            if root == "crate":
                target = resolve(src, segments)
            else:
                # `super` in `a/b.rs` is `a`; in `a/mod.rs`, the parent of `a`.
                base = here[:-1]
                while segments and segments[0] == "super":
                    base, segments = base[:-1], segments[1:]
                target = base + resolve(src.joinpath(*base), segments)
            common = 0
            while common < min(len(here), len(target)) and here[common] == target[common]:
                common += 1
            if common == len(here) or common == len(target):
                continue  # one is the other's ancestor
            found.add((here[:common], here[common], target[common]))
    return found


def cycles(nodes, graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def layered(nodes, graph):
    """The nodes, each after the ones it uses (cycles broken by name)."""
    done, order = set(), []

    def place(v, seen):
        if v in done or v in seen:
            return
        seen.add(v)
        for w in sorted(graph[v]):
            place(w, seen)
        done.add(v)
        order.append(v)

    for v in sorted(nodes):
        place(v, set())
    return order


def check(crate: Path) -> int:
    src = crate / "src"
    levels = defaultdict(lambda: defaultdict(set))
    nodes = defaultdict(set)
    for level, a, b in edges_of(src):
        levels[level][a].add(b)
        nodes[level].update((a, b))
    found = 0
    for level in sorted(levels):
        graph = levels[level]
        folder = "/".join((crate.name, "src") + level)
        print(f"{folder}: {' -> '.join(layered(nodes[level], graph))}")
        for component in cycles(nodes[level], graph):
            found += 1
            print(f"  CYCLE in {folder}: {', '.join(component)}")
    return found


def main() -> int:
    crates = [Path(a) for a in sys.argv[1:]] or sorted(Path("crates").iterdir())
    total = sum(check(c) for c in crates if (c / "src").is_dir())
    print(f"{total} cycle(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
