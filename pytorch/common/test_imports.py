"""No import circle among the pytorch/ modules. Every module's `import` and `from`
statements are walked with ast, at any depth (a lazy import inside a function still makes
a circle: generate.cli and generate.experiment were one, held apart only by the timing of
an import), resolved to this tree's modules, and the graph searched for a cycle. A circle
means neither module can be read, tested or changed alone; the runner's twins keep their
flags (cli) above their run (experiment), never the other way."""

from __future__ import annotations

import ast
import tempfile
import unittest
from pathlib import Path

from common.testkit import PYTORCH


def module_names(root: Path) -> dict[str, Path]:
    """Every module under `root` by its dotted name (a package by its folder's name)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            names[".".join(parts)] = path
    return names


def prefixes(dotted: str) -> list[str]:
    """a, a.b, a.b.c: importing a.b.c runs each of them."""
    parts = dotted.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [t for a in node.names for t in prefixes(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            targets = [*prefixes(base), *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    names = module_names(root)
    return {name: imported(name, path, set(names)) for name, path in names.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of `graph` as the path around it (its first module again at the end), or
    None. A depth-first walk: meeting a module still on the walk's path closes a circle."""
    done, on_path = set(), []
    for start in sorted(graph):
        if start in done:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        on_path.append(start)
        while stack:
            node, successors = stack[-1]
            nxt = next(successors, None)
            if nxt is None:
                stack.pop()
                on_path.pop()
                done.add(node)
            elif nxt in on_path:
                return [*on_path[on_path.index(nxt) :], nxt]
            elif nxt not in done:
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
                on_path.append(nxt)
    return None


class NoCircle(unittest.TestCase):
    def test_no_module_imports_itself_round_about(self):
        graph = import_graph(PYTORCH)
        cycle = find_cycle(graph)
        self.assertIsNone(cycle, "an import circle: " + " -> ".join(cycle or []))

    def test_the_walk_sees_the_trees_imports(self):
        graph = import_graph(PYTORCH)
        # A top-level import, a lazy one's package, and a `from package import module`.
        self.assertIn("common.runner", graph["block.cli"])
        self.assertIn("block.cli", graph["block.__main__"])
        self.assertIn("common.threads", graph["kernels.cli"])
        self.assertGreater(sum(map(len, graph.values())), 100)


class Finding(unittest.TestCase):
    """The walk on small trees made here: it finds the circles there are, only those."""

    def tree(self, files: dict[str, str]) -> dict[str, set[str]]:
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        for rel, text in files.items():
            path = Path(d.name) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return import_graph(Path(d.name))

    def test_a_lazy_import_closes_a_circle(self):
        graph = self.tree(
            {
                "pkg/__init__.py": "",
                "pkg/a.py": "def main():\n    from pkg import b\n",
                "pkg/b.py": "import pkg.a\n",
            }
        )
        self.assertEqual(find_cycle(graph), ["pkg.a", "pkg.b", "pkg.a"])

    def test_a_relative_import_and_a_longer_circle(self):
        graph = self.tree(
            {
                "p/__init__.py": "",
                "p/a.py": "from . import b\n",
                "p/b.py": "from .c import x\n",
                "p/c.py": "from p.a import y\n",
            }
        )
        self.assertEqual(find_cycle(graph), ["p.a", "p.b", "p.c", "p.a"])

    def test_shared_imports_are_no_circle(self):
        graph = self.tree(
            {
                "q/__init__.py": "",
                "q/low.py": "import os\n",
                "q/mid.py": "from q import low\n",
                "q/top.py": "from q.low import f\nfrom q import mid\n",
            }
        )
        self.assertEqual(graph["q.top"], {"q", "q.low", "q.mid"})
        self.assertIsNone(find_cycle(graph))


if __name__ == "__main__":
    unittest.main()
