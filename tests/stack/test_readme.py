"""The docs' facts are checked, not trusted: every path in the annotated tree of docs/development.md exists,
and every page the README points to is there (the make targets the docs name: test_images_and_makefile.py).

Run: .venvs/dev/bin/python -m pytest tests/stack/test_readme.py -q
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DEVELOPMENT = (ROOT / "docs" / "development.md").read_text()


def tree_paths() -> list[str]:
    block = DEVELOPMENT.split("## Repository layout", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    paths, parents = [], []
    for line in block.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        names = line.split("#", 1)[0].split()
        parents = parents[:depth]
        for name in names:
            paths.append("/".join(parents + [name.rstrip("/")]))
        if len(names) == 1 and names[0].endswith("/"):
            parents.append(names[0].rstrip("/"))
    return paths


def test_every_path_in_the_tree_exists():
    paths = tree_paths()
    assert len(paths) > 30
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert missing == []


def test_every_doc_the_readme_points_to_exists():
    pointed = set(re.findall(r"[`(](docs/[a-z_]+\.md)[`)]", README))
    assert len(pointed) >= 8
    for doc in pointed:
        assert (ROOT / doc).is_file(), doc


def test_no_document_binds_rays_dashboard_beyond_the_loopback():
    # Ray's job API has no authentication: whoever reaches the dashboard port runs commands on the cluster.
    for path in [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("recipes/*/README.md")]:
        for host in re.findall(r"--dashboard-host[= ](\S+)", path.read_text()):
            assert host in ("127.0.0.1", "localhost"), (path, host)


def test_the_contract_version_the_docs_show_is_the_codes():
    """A /health answer quoted in a doc shows the contract version the simulator really reports."""
    from toolcanary.contract import CONTRACT_VERSION

    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "recipes").glob("*/README.md"))]
    shown = {(path.name, version) for path in docs
             for version in re.findall(r'"contract_version":\s*"([^"]+)"', path.read_text())}
    assert shown, "no doc quotes a /health answer any more: drop this test"
    assert {version for _, version in shown} == {CONTRACT_VERSION}, sorted(shown)
