"""The phases of a call plan, named once: codes, names, and the groups every engine and table uses.

A plan event is one model call's prefill or decode, or a wait. Weak phases come first,
then Strong phases, then waits; engines price events by these groups, results sum them by
them, and the live runner times its run under the same names.
"""

from __future__ import annotations

#: The two models (and the fleet's two pools), by index.
WEAK, STRONG = 0, 1
MODEL_NAMES = ("weak", "strong")

# Phase codes. Weak phases < 2, Strong phases 2..5, waits 6..7.
WEAK_PREFILL, WEAK_DECODE, STRONG_PREFILL, STRONG_VERIFY, STRONG_DECODE, STRONG_VERDICT, TOOL, USER = range(8)
PHASE_NAMES = ("weak_prefill", "weak_decode", "strong_prefill", "strong_verify", "strong_decode", "strong_verdict", "tool", "user")
PREFILL_PHASES = (WEAK_PREFILL, STRONG_PREFILL, STRONG_VERIFY)
DECODE_PHASES = (WEAK_DECODE, STRONG_DECODE, STRONG_VERDICT)
WEAK_PHASES = (WEAK_PREFILL, WEAK_DECODE)
STRONG_PHASES = (STRONG_PREFILL, STRONG_VERIFY, STRONG_DECODE, STRONG_VERDICT)
WAIT_PHASES = (TOOL, USER)
#: (prefill phase, decode phase) of an ordinary call, by model.
CALL_PHASES = ((WEAK_PREFILL, WEAK_DECODE), (STRONG_PREFILL, STRONG_DECODE))

#: The split by phase the publication reports: reported group -> the phases summed into it.
PHASE_GROUPS = {
    "weak_drafting": ("weak_decode",),
    "weak_prefill": ("weak_prefill",),
    "strong_verification": ("strong_verify",),
    "strong_repair_verdict": ("strong_decode", "strong_verdict"),
    "strong_prefill": ("strong_prefill",),
    "tool": ("tool",),
    "user": ("user",),
}

