"""A PEP 517 build backend with no requirements, so that
``pip install ./sdk/python`` works without a package index (a backend such
as setuptools would first be downloaded into pip's isolated build
environment). It builds a pure-Python wheel of the toolwire package, an
sdist, and an editable install (a .pth file), from the [project] table of
pyproject.toml (name, version, description, requires-python).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "toolwire"


def _project():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    table = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def field(name):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(name), table, re.M)
        if not m:
            raise ValueError("pyproject.toml: [project] has no %s" % name)
        return m.group(1)
    return field("name"), field("version"), field("description"), field("requires-python")


def _metadata():
    name, version, summary, requires = _project()
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    meta = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            "Description-Content-Type: text/markdown\n\n%s" % (name, version, summary, requires, readme))
    return name, version, meta


def _dist_info(name, version):
    return "%s-%s.dist-info" % (name, version)


_WHEEL = "Wheel-Version: 1.0\nGenerator: toolwire-build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _files():
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".typed")):
                full = os.path.join(dirpath, f)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _write_wheel(wheel_directory, entries):
    name, version, meta = _metadata()
    info = _dist_info(name, version)
    entries = list(entries) + [(info + "/METADATA", meta.encode()), (info + "/WHEEL", _WHEEL.encode())]
    record = []
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, meta = _metadata()
    info = os.path.join(metadata_directory, _dist_info(name, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(meta)
    with open(os.path.join(info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_WHEEL)
    return _dist_info(name, version)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, ((arc, open(full, "rb").read()) for full, arc in _files()))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("_toolwire_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version, meta = _metadata()
    base = "%s-%s" % (name, version)
    filename = base + ".tar.gz"
    paths = ["pyproject.toml", "README.md", "_build/backend.py"] + [arc for _, arc in _files()]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in paths:
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = meta.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return filename
