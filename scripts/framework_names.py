#!/usr/bin/env python3
"""Lists every argument name a framework's source defines, for the export
tests (tests/inputs/export/): Megatron-LM's command-line flags, from the
add_argument calls of megatron/training/arguments.py, or torchtitan's TOML
keys (section.key, dotted), from the dataclasses of
torchtitan/config/job_config.py.

  scripts/framework_names.py megatron /work/.mirror/NVIDIA+Megatron-LM/repo core_v0.15.3 \
      > tests/inputs/export/megatron_arguments.txt
  scripts/framework_names.py torchtitan /work/.mirror/pytorch+torchtitan/repo v0.2.2 \
      > tests/inputs/export/torchtitan_keys.txt

GIT_DIR is a checkout or a bare clone (what `fetch` gives); REV any commit-ish.
"""
import ast
import subprocess
import sys

SOURCES = {
    "megatron": ("NVIDIA/Megatron-LM", "megatron/training/arguments.py"),
    "torchtitan": ("pytorch/torchtitan", "torchtitan/config/job_config.py"),
}


def megatron_flags(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    names.add(arg.value)
    return sorted(names)


def torchtitan_keys(tree):
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def nested_class(stmt):
        # `field: Section = field(default_factory=Section)`: a sub-section.
        ann = stmt.annotation
        if isinstance(ann, ast.Name) and ann.id in classes:
            return ann.id
        return None

    keys = []

    def walk(class_name, prefix):
        for stmt in classes[class_name].body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                sub = nested_class(stmt)
                if sub:
                    walk(sub, f"{prefix}{name}.")
                else:
                    keys.append(prefix + name)

    walk("JobConfig", "")
    return sorted(keys)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in SOURCES:
        sys.exit(__doc__)
    framework, git_dir, rev = sys.argv[1:]
    repo, path = SOURCES[framework]
    commit = subprocess.check_output(["git", "-C", git_dir, "rev-parse", f"{rev}^{{commit}}"], text=True).strip()
    source = subprocess.check_output(["git", "-C", git_dir, "show", f"{commit}:{path}"], text=True)
    tree = ast.parse(source)
    names = megatron_flags(tree) if framework == "megatron" else torchtitan_keys(tree)
    print(f"# repository: {repo}")
    print(f"# path: {path}")
    print(f"# commit: {commit} ({rev})")
    print(f"# written by scripts/framework_names.py {framework} GIT_DIR {rev}; {len(names)} names")
    for n in names:
        print(n)


if __name__ == "__main__":
    main()
