"""A small airline-style tool environment backed by SQLite, with READ and WRITE tools.

Why: the protocol's safety claim — no state-changing action runs before the Strong
model has reviewed the segment leading to it, and a rejected segment leaves the world
as if its held write never existed — is only checkable against real state. READ tools
run on a connection opened with ``PRAGMA query_only`` (SQLite refuses writes on it);
WRITE tools run on a separate connection and only through `execute(..., reviewed=True)`.
`snapshot()` returns every row, so states diff before and after.

Tool names and READ/WRITE/GENERIC kinds follow τ²-Bench's airline domain
(traces/data/tool_types.json). Traces carry no tool arguments, so `arguments_for`
derives them deterministically from the database and a seeded RNG.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS: dict[str, str] = {
    "get_user_details": "read", "get_reservation_details": "read", "search_direct_flight": "read",
    "search_onestop_flight": "read", "get_flight_status": "read", "list_all_airports": "read",
    "calculate": "generic", "transfer_to_human_agents": "generic",
    "book_reservation": "write", "cancel_reservation": "write", "update_reservation_baggages": "write",
    "update_reservation_flights": "write", "update_reservation_passengers": "write", "send_certificate": "write",
}
#: GENERIC tools that end or hand off the conversation are held like writes (traces/schema.py).
IRREVERSIBLE_GENERIC = {"transfer_to_human_agents"}
AIRPORTS = ("SFO", "JFK", "LAX", "ORD", "SEA", "BOS", "ATL", "DEN")

SCHEMA = """
CREATE TABLE users (user_id TEXT PRIMARY KEY, name TEXT, membership TEXT, certificates INTEGER);
CREATE TABLE flights (flight_number TEXT, date TEXT, origin TEXT, destination TEXT, status TEXT, seats INTEGER, price INTEGER,
                      PRIMARY KEY (flight_number, date));
CREATE TABLE reservations (reservation_id TEXT PRIMARY KEY, user_id TEXT, flight_number TEXT, date TEXT, passengers INTEGER,
                           bags INTEGER, status TEXT);
CREATE TABLE transfers (n INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT, reason TEXT);
"""


class UnreviewedWrite(RuntimeError):
    """A WRITE (or irreversible) tool was about to run before Strong review."""


class ToolError(ValueError):
    """Bad tool name or arguments."""


@dataclass(frozen=True)
class ToolResult:
    tool: str
    kind: str
    arguments: dict
    result: Any
    changed_rows: int


class AirlineEnv:
    """SQLite airline service: users, flights, reservations; seeded contents."""

    def __init__(self, seed: int = 0, users: int = 20, flights_per_day: int = 12, days: int = 5, path: str | Path | None = None):
        self.seed = seed
        self._tmp = None
        if path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="specagent-airline-")
            path = Path(self._tmp.name) / "airline.sqlite"
        self.path = Path(path)
        self._rw = sqlite3.connect(self.path, isolation_level=None)
        self._rw.executescript(SCHEMA)
        self._populate(random.Random(seed), users, flights_per_day, days)
        self._ro = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None)
        self._ro.execute("PRAGMA query_only = ON")
        self.log: list[tuple[str, str, bool]] = []  # (tool, kind, reviewed) of every executed call

    def close(self) -> None:
        self._ro.close()
        self._rw.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> "AirlineEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _populate(self, rng: random.Random, users: int, per_day: int, days: int) -> None:
        cur = self._rw
        cur.execute("BEGIN")
        for u in range(users):
            cur.execute("INSERT INTO users VALUES (?,?,?,?)", (f"user_{u:03d}", f"Passenger {u}", rng.choice(["regular", "silver", "gold"]), 0))
        for d in range(days):
            date = f"2026-05-{d + 1:02d}"
            for f in range(per_day):
                o, dst = rng.sample(AIRPORTS, 2)
                cur.execute("INSERT INTO flights VALUES (?,?,?,?,?,?,?)",
                            (f"HAT{f:03d}", date, o, dst, "available", rng.randint(5, 60), rng.randint(80, 900)))
        for r in range(users * 2):
            d = rng.randrange(days)
            f = rng.randrange(per_day)
            cur.execute("INSERT INTO reservations VALUES (?,?,?,?,?,?,?)",
                        (f"R{r:05d}", f"user_{r % users:03d}", f"HAT{f:03d}", f"2026-05-{d + 1:02d}", rng.randint(1, 3), rng.randint(0, 2), "active"))
        cur.execute("COMMIT")

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, list[tuple]]:
        """Every row of every table, in key order (what a diff compares)."""
        out = {}
        for t in ("users", "flights", "reservations", "transfers"):
            out[t] = [tuple(r) for r in self._ro.execute(f"SELECT * FROM {t} ORDER BY 1, 2")]
        return out

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.snapshot(), sort_keys=True).encode()).hexdigest()

    @staticmethod
    def diff(before: dict[str, list[tuple]], after: dict[str, list[tuple]]) -> dict[str, dict[str, list[tuple]]]:
        """Rows removed and added per table."""
        out = {}
        for t in before:
            b, a = set(before[t]), set(after[t])
            if a != b:
                out[t] = {"removed": sorted(b - a), "added": sorted(a - b)}
        return out

    # ------------------------------------------------------------------ tools
    @staticmethod
    def kind(tool: str) -> str:
        if tool not in KINDS:
            raise ToolError(f"unknown airline tool '{tool}'; known: {', '.join(sorted(KINDS))}")
        return KINDS[tool]

    @classmethod
    def holds(cls, tool: str) -> bool:
        return cls.kind(tool) == "write" or tool in IRREVERSIBLE_GENERIC

    def execute(self, tool: str, args: dict, reviewed: bool) -> ToolResult:
        """Run a tool; WRITE and irreversible tools refuse to run unless `reviewed`."""
        kind = self.kind(tool)
        held = self.holds(tool)
        if held and not reviewed:
            raise UnreviewedWrite(f"{tool} is a {kind} tool and must be reviewed before it runs")
        if held:
            before = self._rw.total_changes
            self._rw.execute("BEGIN")
            try:
                result = getattr(self, f"_t_{tool}")(self._rw, **args)
                self._rw.execute("COMMIT")
            except BaseException:
                self._rw.execute("ROLLBACK")
                raise
            changed = self._rw.total_changes - before
        else:
            result = getattr(self, f"_t_{tool}")(self._ro, **args)
            changed = 0
        self.log.append((tool, kind, reviewed))
        return ToolResult(tool, kind, args, result, changed)

    def arguments_for(self, tool: str, user_id: str, rng: random.Random) -> dict:
        """Deterministic, valid arguments for `tool` on behalf of `user_id` (traces have none)."""
        self.kind(tool)
        res = [r[0] for r in self._ro.execute("SELECT reservation_id FROM reservations WHERE user_id=? AND status='active' ORDER BY 1", (user_id,))]
        flights = list(self._ro.execute("SELECT flight_number, date, origin, destination FROM flights ORDER BY 2, 1"))
        f = flights[rng.randrange(len(flights))]
        rid = res[rng.randrange(len(res))] if res else None
        if tool in ("get_user_details", "send_certificate", "transfer_to_human_agents"):
            a: dict = {"user_id": user_id}
            if tool == "send_certificate":
                a["amount"] = rng.choice([50, 100, 150])
            if tool == "transfer_to_human_agents":
                a["reason"] = "customer request"
            return a
        if tool in ("search_direct_flight", "search_onestop_flight"):
            return {"origin": f[2], "destination": f[3], "date": f[1]}
        if tool == "get_flight_status":
            return {"flight_number": f[0], "date": f[1]}
        if tool in ("list_all_airports",):
            return {}
        if tool == "calculate":
            return {"expression": f"{rng.randint(1, 999)} * {rng.randint(1, 9)}"}
        if tool == "book_reservation":
            return {"user_id": user_id, "flight_number": f[0], "date": f[1], "passengers": rng.randint(1, 3)}
        if rid is None:  # nothing to act on: look the user up instead
            return {"reservation_id": "R_NONE"}
        if tool in ("get_reservation_details", "cancel_reservation"):
            return {"reservation_id": rid}
        if tool == "update_reservation_baggages":
            return {"reservation_id": rid, "bags": rng.randint(0, 3)}
        if tool == "update_reservation_flights":
            return {"reservation_id": rid, "flight_number": f[0], "date": f[1]}
        if tool == "update_reservation_passengers":
            return {"reservation_id": rid, "passengers": rng.randint(1, 4)}
        raise ToolError(f"no argument rule for tool '{tool}'")

    # tool bodies: (connection, **args) -> JSON-able result
    @staticmethod
    def _t_get_user_details(c, user_id):
        row = c.execute("SELECT * FROM users WHERE user_id=?", (user_id,)).fetchone()
        rs = [r[0] for r in c.execute("SELECT reservation_id FROM reservations WHERE user_id=?", (user_id,))]
        return {"user": row, "reservations": rs}

    @staticmethod
    def _t_get_reservation_details(c, reservation_id):
        return c.execute("SELECT * FROM reservations WHERE reservation_id=?", (reservation_id,)).fetchone()

    @staticmethod
    def _t_search_direct_flight(c, origin, destination, date):
        return c.execute("SELECT * FROM flights WHERE origin=? AND destination=? AND date=?", (origin, destination, date)).fetchall()

    @staticmethod
    def _t_search_onestop_flight(c, origin, destination, date):
        return c.execute(
            "SELECT a.flight_number, b.flight_number FROM flights a JOIN flights b ON a.destination=b.origin AND a.date=b.date "
            "WHERE a.origin=? AND b.destination=? AND a.date=?", (origin, destination, date)).fetchall()

    @staticmethod
    def _t_get_flight_status(c, flight_number, date):
        return c.execute("SELECT status FROM flights WHERE flight_number=? AND date=?", (flight_number, date)).fetchone()

    @staticmethod
    def _t_list_all_airports(c):
        return sorted({r[0] for r in c.execute("SELECT origin FROM flights")})

    @staticmethod
    def _t_calculate(c, expression):
        a, b = (int(x) for x in expression.split("*"))
        return a * b

    @staticmethod
    def _t_transfer_to_human_agents(c, user_id, reason):
        c.execute("INSERT INTO transfers (user_id, reason) VALUES (?,?)", (user_id, reason))
        return "transferred"

    @staticmethod
    def _t_book_reservation(c, user_id, flight_number, date, passengers):
        n = c.execute("SELECT COUNT(*) FROM reservations").fetchone()[0]
        rid = f"B{n:05d}"
        c.execute("INSERT INTO reservations VALUES (?,?,?,?,?,?,?)", (rid, user_id, flight_number, date, passengers, 0, "active"))
        c.execute("UPDATE flights SET seats = seats - ? WHERE flight_number=? AND date=?", (passengers, flight_number, date))
        return {"reservation_id": rid}

    @staticmethod
    def _t_cancel_reservation(c, reservation_id):
        c.execute("UPDATE reservations SET status='cancelled' WHERE reservation_id=?", (reservation_id,))
        return "cancelled"

    @staticmethod
    def _t_update_reservation_baggages(c, reservation_id, bags):
        c.execute("UPDATE reservations SET bags=? WHERE reservation_id=?", (bags, reservation_id))
        return "ok"

    @staticmethod
    def _t_update_reservation_flights(c, reservation_id, flight_number, date):
        c.execute("UPDATE reservations SET flight_number=?, date=? WHERE reservation_id=?", (flight_number, date, reservation_id))
        return "ok"

    @staticmethod
    def _t_update_reservation_passengers(c, reservation_id, passengers):
        c.execute("UPDATE reservations SET passengers=? WHERE reservation_id=?", (passengers, reservation_id))
        return "ok"

    @staticmethod
    def _t_send_certificate(c, user_id, amount):
        c.execute("UPDATE users SET certificates = certificates + ? WHERE user_id=?", (amount, user_id))
        return "sent"
