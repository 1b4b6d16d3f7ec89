"""Hostile inputs to `replay`, `plan`, `sweep` and `predict` (findings 2026-12-03, F3-12, F3-17, F3-18 and KEY=VALUE
flags): one over-window check for every command that serves a request trace, list flags that refuse a key
given twice (aliases too) and unknown keys, `nan` called a number, and no flag combination that loses output."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specagent.cli.app import app
from specagent.common.errors import InputError
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.rates_prices import parse_prices
from specagent.simulator.sweep import run_sweep
from specagent.simulator.sweep_config import SweepConfig
from specagent.traces.errors import TraceFormatError
from specagent.traces.requests import load_requests

HEAD = "arrival_s,prompt_tokens,output_tokens\n"
runner = CliRunner()


def one_line_error(args: list[str]) -> str:
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.output  # plan's estimate lines may come first; the error is one line
    return errors[0]


@pytest.fixture
def over(tmp_path):
    p = tmp_path / "over.csv"
    p.write_text(HEAD + "0,100,9\n1,300000,10\n")
    return p


def test_replay_refuses_a_request_past_the_window_as_plan_does(over):
    """F3-12: the same CSV, the same words from both commands: the line, the tokens and the window."""
    replay = one_line_error(["replay", str(over), "--strong-hardware", "h200", "--strong-gpus", "8"])
    plan = one_line_error(["plan", "--requests", str(over), "--rate", "1/s", "--gpu", "h200"])
    for said in (f"{over}: line 3: its request of 300,010 tokens (prompt + output) cannot be served", "262,144"):
        assert said in replay and said in plan, (replay, plan)


def test_a_sweep_cell_refuses_it_too(over, tmp_path):
    cfg = SweepConfig.from_dict({"sweep": {"tasks": 4, "seed": 2, "steady": False, "requests": str(over)},
                                 "grid": {"strategy": ["serving"], "rate": [1.0], "fleet": ["f"], "hardware": ["h200"]},
                                 "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}, "req.toml")
    with pytest.raises(Exception, match=r"line 3: its request of 300,010 tokens .* cannot be served"):
        run_sweep(cfg, tmp_path / "out")


def test_a_request_inside_the_window_replays(tmp_path):
    p = tmp_path / "ok.csv"
    p.write_text(HEAD + "0,100,9\n1,200000,10\n")
    r = runner.invoke(app, ["replay", str(p), "--strong-hardware", "h200", "--strong-gpus", "8"])
    assert r.exit_code == 0, r.output


def short_window_model(tmp_path):
    """A Llama-shaped config.json with SmolLM2-135M's sizes and its 8,192-token window (shorter than 32,768)."""
    d = tmp_path / "smol"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152,
        "max_position_embeddings": 8192, "tie_word_embeddings": True, "hidden_act": "silu", "rms_norm_eps": 1e-5}))
    return d / "config.json"


def test_replay_sizes_the_deployment_to_its_trace_not_to_a_fixed_context(tmp_path):
    """Replay held every deployment to a 32,768-token sequence before reading the trace, so a model with a shorter window
    (SmolLM2-135M, the real server's: 8,192) was refused whatever its requests; plan sizes to the trace, so does replay."""
    cfg = short_window_model(tmp_path)
    p = tmp_path / "ok.csv"
    p.write_text(HEAD + "0,100,9\n1,4000,10\n")
    r = runner.invoke(app, ["replay", str(p), "--strong-model", str(cfg), "--strong-hardware", "h200", "--strong-gpus", "1",
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["requests"] == 2


def test_past_a_short_window_replay_and_plan_refuse_in_the_same_words(tmp_path):
    cfg = short_window_model(tmp_path)
    over = tmp_path / "over.csv"
    over.write_text(HEAD + "0,100,9\n1,9000,10\n")
    model = ["--strong-model", str(cfg), "--strong-gpus", "1"]
    replay = one_line_error(["replay", str(over), "--strong-hardware", "h200", *model])
    plan = one_line_error(["plan", "--requests", str(over), "--rate", "1/s", "--gpu", "h200", *model])
    for said in (f"{over}: line 3: its request of 9,010 tokens (prompt + output) cannot be served", "reads at most 8,192 tokens"):
        assert said in replay and said in plan, (replay, plan)


@pytest.mark.parametrize("value", ["nan", "NaN", " inf", "-Infinity"])
def test_a_non_finite_arrival_is_called_a_number_not_a_date(tmp_path, value):
    """F3-17: `nan` (which pandas reads as missing) is a number of seconds that is not finite, as `inf` is."""
    p = tmp_path / "t.csv"
    p.write_text(HEAD + f"{value},10,5\n1,10,5\n")
    with pytest.raises(TraceFormatError) as e:
        load_requests(p)
    msg = str(e.value)
    assert "line 2" in msg and "a finite number of seconds" in msg and "date-time" not in msg, msg


def test_a_column_given_twice_is_refused(tmp_path):
    """F3-18: pandas read the first output_tokens and renamed the second, without a word."""
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,output_tokens\n0,10,5,7\n")
    with pytest.raises(TraceFormatError, match=r"header: field 'output_tokens': expected each column once.*column 3 and column 4"):
        load_requests(p)


@pytest.mark.parametrize("items,said", [
    (["h20=1,h20=2"], "h20 is already priced by 'h20=1'"), (["h20=1", "h20=2"], "already priced"),
    (["h200=3,h200_sxm=4"], "h200_sxm is already priced by 'h200=3'"), (["H200=3", "h200=4"], "already priced"),
    (["h999=3"], "'h999' is not a GPU type"),
])
def test_a_price_list_refuses_a_gpu_twice_and_unknown_gpus(items, said):
    with pytest.raises(ValueError, match=said):
        parse_prices(items)


@pytest.mark.parametrize("command", [["replay", "{csv}"], ["plan", "--requests", "{csv}", "--rate", "1/s", "--gpu", "h20"],
                                     ["predict"]])
def test_every_command_with_price_refuses_the_same_lists(tmp_path, command):
    csv = tmp_path / "r.csv"
    csv.write_text(HEAD + "0,100,9\n1,120,10\n")
    args = [a.replace("{csv}", str(csv)) for a in command]
    for bad, said in ((["--price", "h200=3,h200_sxm=4"], "already priced"), (["--price", "h999=3"], "is not a GPU type")):
        assert said in one_line_error([*args, *bad])


@pytest.mark.parametrize("flags,said", [(["--brief", "--phases"], "--brief and --phases: not both"),
                                        (["--quiet", "--format", "json"], "--quiet and --format json: not both"),
                                        (["--quiet", "--json"], "--quiet and --format json: not both")])
def test_predict_refuses_flag_pairs_that_would_lose_output(tmp_path, flags, said):
    assert said in one_line_error(["predict", "-o", str(tmp_path / "o"), *flags])
    assert not (tmp_path / "o").exists()


def test_an_acceptance_source_that_is_not_a_string_is_refused():
    with pytest.raises(InputError, match="acceptance.source must be a string"):
        AcceptanceModel(source=42)
