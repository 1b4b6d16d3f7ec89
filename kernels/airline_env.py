"""An airline tool service backed by SQLite, shaped like τ²-Bench's airline domain, with READ and WRITE tools.

Why: the protocol's two properties need real state. Grounding: every drafted READ runs
against the database and its result — with its real size in tokens — is what the next
drafted step builds on. Safety: no state-changing action runs before the Strong model has
reviewed the segment leading to it, and a rejected segment leaves the world as if its
held write never existed. READ tools run on a connection opened read-only with ``PRAGMA
query_only`` (SQLite refuses writes on it); WRITE tools run on a separate connection,
each in one transaction, and only through `execute(..., reviewed=True)`. `snapshot()`
returns every row, so states diff before and after.

The data model follows τ²-Bench's airline domain as its paper and tool list describe it
(users with addresses, payment methods and saved passengers; flights by number with a
status, seats and prices per cabin for each date; reservations with flight segments,
passengers and payment history), so tool results have the sizes an agent really reads:
a user or a reservation is a JSON object of a few hundred tokens, as in the shipped
τ²-Bench traces (median tool result 322 tokens for get_user_details, 264 for
get_reservation_details; here about 410 and 280, tests/test_kernels_live.py checks the range). The contents are generated from a seed; tool names and their
READ/WRITE/GENERIC kinds are τ²-Bench's (traces/data/tool_types.json).

Traces carry no tool arguments, so `arguments_for` derives valid ones from the database
and a seeded RNG: every read names rows that exist (the user's own reservations, routes
that are flown, connections that exist), every write acts on the user's own rows.
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

from specagent.traces.tokens import estimate_text_tokens

KINDS: dict[str, str] = {
    "get_user_details": "read", "get_reservation_details": "read", "search_direct_flight": "read",
    "search_onestop_flight": "read", "get_flight_status": "read", "list_all_airports": "read",
    "calculate": "generic", "transfer_to_human_agents": "generic",
    "book_reservation": "write", "cancel_reservation": "write", "update_reservation_baggages": "write",
    "update_reservation_flights": "write", "update_reservation_passengers": "write", "send_certificate": "write",
}
#: GENERIC tools that end or hand off the conversation are held like writes (traces/schema.py).
IRREVERSIBLE_GENERIC = {"transfer_to_human_agents"}
AIRPORTS = (("ATL", "Atlanta"), ("BOS", "Boston"), ("CLT", "Charlotte"), ("DEN", "Denver"), ("DFW", "Dallas-Fort Worth"),
            ("DTW", "Detroit"), ("EWR", "Newark"), ("IAH", "Houston"), ("JFK", "New York"), ("LAS", "Las Vegas"),
            ("LAX", "Los Angeles"), ("LGA", "New York"), ("MCO", "Orlando"), ("MIA", "Miami"), ("MSP", "Minneapolis"),
            ("ORD", "Chicago"), ("PHL", "Philadelphia"), ("PHX", "Phoenix"), ("SEA", "Seattle"), ("SFO", "San Francisco"))
CABINS = ("basic_economy", "economy", "business")
FIRST = ("Mia", "Noah", "Olivia", "Liam", "Emma", "Ethan", "Ava", "Lucas", "Sofia", "Mason", "Isabella", "Yusuf", "Amelia",
         "Omar", "Harper", "Raj", "Chen", "Aarav", "Fatima", "Mei")
LAST = ("Li", "Garcia", "Smith", "Khan", "Kim", "Nguyen", "Rossi", "Silva", "Patel", "Brown", "Lopez", "Wilson", "Ahmed",
        "Taylor", "Muller", "Sato", "Johnson", "Davis", "Martin", "Moore")
STREETS = ("Maple Drive", "Oak Street", "Elm Avenue", "Cedar Lane", "Pine Court", "Lake View", "Hill Road", "Park Avenue")
#: The service's "now": earlier dates have flown (status landed), later ones can be booked.
TODAY = 10
DAYS = 20

SCHEMA = """
CREATE TABLE airports (iata TEXT PRIMARY KEY, city TEXT);
CREATE TABLE flights (flight_number TEXT PRIMARY KEY, origin TEXT, destination TEXT, departure TEXT, arrival TEXT);
CREATE TABLE flight_dates (flight_number TEXT, date TEXT, status TEXT, seats_basic_economy INTEGER, seats_economy INTEGER,
                           seats_business INTEGER, price_basic_economy INTEGER, price_economy INTEGER, price_business INTEGER,
                           PRIMARY KEY (flight_number, date));
CREATE TABLE users (user_id TEXT PRIMARY KEY, first_name TEXT, last_name TEXT, address TEXT, email TEXT, dob TEXT,
                    membership TEXT, payment_methods TEXT, saved_passengers TEXT);
CREATE TABLE reservations (reservation_id TEXT PRIMARY KEY, user_id TEXT, origin TEXT, destination TEXT, flight_type TEXT,
                           cabin TEXT, flights TEXT, passengers TEXT, payment_history TEXT, created_at TEXT,
                           total_baggages INTEGER, nonfree_baggages INTEGER, insurance TEXT, status TEXT);
CREATE TABLE transfers (n INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT, summary TEXT);
"""
TABLES = ("airports", "flights", "flight_dates", "users", "reservations", "transfers")


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
    #: Size of the result as the agent reads it (JSON text, `traces.tokens` estimator).
    tokens: int


def result_tokens(result: Any) -> int:
    """Tokens of a tool result as the agent's context receives it: the estimator on its JSON text (at least 1)."""
    text = result if isinstance(result, str) else json.dumps(result)
    return max(1, estimate_text_tokens(text))


def _date(day: int) -> str:
    return f"2024-05-{day + 1:02d}"


class AirlineEnv:
    """SQLite airline service: airports, flights by date, users, reservations; contents seeded."""

    def __init__(self, seed: int = 0, users: int = 40, routes: int = 40, path: str | Path | None = None):
        self.seed = seed
        self._tmp = None
        if path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="specagent-airline-")
            path = Path(self._tmp.name) / "airline.sqlite"
        self.path = Path(path)
        self._rw = sqlite3.connect(self.path, isolation_level=None)
        self._rw.executescript(SCHEMA)
        self._populate(random.Random(f"airline-db:{seed}"), users, routes)
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

    # ------------------------------------------------------------------ contents
    def _populate(self, rng: random.Random, n_users: int, n_routes: int) -> None:
        cur = self._rw
        cur.execute("BEGIN")
        cur.executemany("INSERT INTO airports VALUES (?,?)", AIRPORTS)
        codes = [a for a, _ in AIRPORTS]
        pairs = sorted({tuple(rng.sample(codes, 2)) for _ in range(4 * n_routes)})
        routes = rng.sample(pairs, min(n_routes, len(pairs)))
        flights, dates = [], []
        for r, (o, d) in enumerate(sorted(routes)):
            for j in range(3):
                num = f"HAT{3 * r + j + 1:03d}"
                dep = rng.randrange(5 * 60, 22 * 60, 5)
                arr = (dep + rng.randrange(60, 330, 5)) % (24 * 60)
                flights.append((num, o, d, f"{dep // 60:02d}:{dep % 60:02d}:00", f"{arr // 60:02d}:{arr % 60:02d}:00"))
                base = rng.randint(60, 200)
                for day in range(DAYS):
                    status = "landed" if day < TODAY else ("delayed" if rng.random() < 0.1 else "on time") if day == TODAY else \
                        ("cancelled" if rng.random() < 0.05 else "available")
                    dates.append((num, _date(day), status, rng.randint(0, 20), rng.randint(0, 20), rng.randint(0, 20),
                                  base + rng.randint(0, 40), 2 * base + rng.randint(0, 80), 5 * base + rng.randint(0, 200)))
        cur.executemany("INSERT INTO flights VALUES (?,?,?,?,?)", flights)
        cur.executemany("INSERT INTO flight_dates VALUES (?,?,?,?,?,?,?,?,?)", dates)
        price = {(f, dt): (pb, pe, pbus) for f, dt, _, _, _, _, pb, pe, pbus in dates}
        by_origin: dict[str, list[tuple]] = {}
        for f in flights:
            by_origin.setdefault(f[1], []).append(f)
        users, reservations = [], []
        for u in range(n_users):
            first, last = rng.choice(FIRST), rng.choice(LAST)
            uid = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
            address = {"address1": f"{rng.randint(10, 9999)} {rng.choice(STREETS)}", "address2": f"Suite {rng.randint(100, 999)}",
                       "city": rng.choice(AIRPORTS)[1], "country": "USA", "state": rng.choice(["CA", "NY", "TX", "IL", "WA", "FL"]),
                       "zip": f"{rng.randint(10000, 99999)}"}
            methods = {}
            for _ in range(rng.randint(1, 3)):
                kind = rng.choice(["credit_card", "gift_card", "certificate"])
                pid = f"{kind}_{rng.randint(1000000, 9999999)}"
                methods[pid] = ({"source": kind, "brand": rng.choice(["visa", "mastercard"]), "last_four": f"{rng.randint(0, 9999):04d}", "id": pid}
                                if kind == "credit_card" else {"source": kind, "amount": rng.choice([100, 150, 250, 500]), "id": pid})
            if not any(m["source"] == "credit_card" for m in methods.values()):
                pid = f"credit_card_{rng.randint(1000000, 9999999)}"
                methods[pid] = {"source": "credit_card", "brand": "visa", "last_four": f"{rng.randint(0, 9999):04d}", "id": pid}
            passengers = [{"first_name": rng.choice(FIRST), "last_name": rng.choice(LAST),
                           "dob": f"19{rng.randint(50, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"} for _ in range(rng.randint(0, 2))]
            users.append((uid, first, last, json.dumps(address), f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
                          f"19{rng.randint(50, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                          rng.choice(["regular", "silver", "gold"]), json.dumps(methods), json.dumps(passengers)))
            card = next(p for p, m in methods.items() if m["source"] == "credit_card")
            for _ in range(rng.randint(2, 5)):
                f1 = rng.choice(flights)
                segs = [f1]
                if rng.random() < 0.4 and by_origin.get(f1[2]):
                    segs.append(rng.choice(by_origin[f1[2]]))
                day = rng.randrange(DAYS - 1)
                cabin = rng.choice(CABINS)
                pax = [{"first_name": first, "last_name": last, "dob": users[-1][5]}] + passengers[: rng.randint(0, len(passengers))]
                legs = [{"origin": s[1], "destination": s[2], "flight_number": s[0], "date": _date(day),
                         "price": price[(s[0], _date(day))][CABINS.index(cabin)]} for s in segs]
                total = sum(leg["price"] for leg in legs) * len(pax)
                bags = rng.randint(0, 3)
                reservations.append((
                    "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6)), uid, segs[0][1], segs[-1][2],
                    "one_way", cabin, json.dumps(legs), json.dumps(pax), json.dumps([{"payment_id": card, "amount": total}]),
                    f"2024-04-{rng.randint(1, 30):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00", bags,
                    max(0, bags - rng.randint(0, 2)), rng.choice(["yes", "no"]), "cancelled" if rng.random() < 0.1 else "active"))
        cur.executemany("INSERT INTO users VALUES (?,?,?,?,?,?,?,?,?)", users)
        cur.executemany("INSERT OR IGNORE INTO reservations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", reservations)
        cur.execute("COMMIT")

    def user_ids(self) -> list[str]:
        return [r[0] for r in self._ro.execute("SELECT user_id FROM users ORDER BY rowid")]

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, list[tuple]]:
        """Every row of every table, in key order (what a diff compares)."""
        return {t: [tuple(r) for r in self._ro.execute(f"SELECT * FROM {t} ORDER BY 1, 2")] for t in TABLES}

    def digest(self) -> str:
        h = hashlib.sha256()
        for t in TABLES:
            for r in self._ro.execute(f"SELECT * FROM {t} ORDER BY 1, 2"):
                h.update(repr(r).encode())
            h.update(b"|")
        return h.hexdigest()

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
        try:
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
        except TypeError as exc:
            raise ToolError(f"{tool}: bad arguments {sorted(args)} ({exc})") from None
        self.log.append((tool, kind, reviewed))
        return ToolResult(tool, kind, args, result, changed, result_tokens(result))

    def arguments_for(self, tool: str, user_id: str, rng: random.Random) -> dict:
        """Valid arguments for `tool` on behalf of `user_id`, drawn from the database with `rng` (traces have none).

        Reads name rows that exist; writes act on the user's own rows (an active reservation
        where there is one) and book seats that are for sale.
        """
        self.kind(tool)
        c = self._ro
        own = [r[0] for r in c.execute("SELECT reservation_id FROM reservations WHERE user_id=? ORDER BY created_at, 1", (user_id,))]
        active = [r[0] for r in c.execute(
            "SELECT reservation_id FROM reservations WHERE user_id=? AND status='active' ORDER BY created_at, 1", (user_id,))]
        if tool in ("get_user_details", "send_certificate"):
            return {"user_id": user_id, **({"amount": rng.choice([50, 100, 150])} if tool == "send_certificate" else {})}
        if tool == "transfer_to_human_agents":
            return {"summary": f"User {user_id} asks for help that the policy does not allow the agent to give."}
        if tool == "list_all_airports":
            return {}
        if tool == "calculate":
            return {"expression": f"{rng.randint(100, 2000)} {rng.choice('+-*')} {rng.randint(1, 9)}"}
        if tool in ("search_direct_flight", "get_flight_status", "book_reservation"):
            bookable = tool != "get_flight_status"
            rows = list(c.execute("SELECT d.flight_number, d.date, f.origin, f.destination FROM flight_dates d JOIN flights f USING "
                                  "(flight_number) WHERE ? = 0 OR d.status = 'available' ORDER BY 2, 1", (int(bookable),)))
            num, date, o, d = rows[rng.randrange(len(rows))]
            if tool == "search_direct_flight":
                return {"origin": o, "destination": d, "date": date}
            if tool == "get_flight_status":
                return {"flight_number": num, "date": date}
            cabin = rng.choice(CABINS)
            card = self._card(user_id)
            return {"user_id": user_id, "origin": o, "destination": d, "flight_type": "one_way", "cabin": cabin,
                    "flights": [{"flight_number": num, "date": date}], "passengers": [self._self_passenger(user_id)],
                    "payment_id": card, "total_baggages": rng.randint(0, 2), "nonfree_baggages": 0, "insurance": rng.choice(["yes", "no"])}
        if tool == "search_onestop_flight":  # a connection that is flown and for sale
            rows = list(c.execute(
                "SELECT DISTINCT fa.origin, fb.destination, da.date FROM flights fa JOIN flights fb ON fa.destination = fb.origin "
                "JOIN flight_dates da ON da.flight_number = fa.flight_number JOIN flight_dates db ON db.flight_number = fb.flight_number "
                "AND db.date = da.date WHERE da.status = 'available' AND db.status = 'available' AND fb.departure > fa.arrival "
                "AND fb.destination != fa.origin ORDER BY 1, 2, 3"))
            o, d, date = rows[rng.randrange(len(rows))]
            return {"origin": o, "destination": d, "date": date}
        if not own:
            raise ToolError(f"user {user_id} has no reservation for {tool} to act on")
        rid = (active or own)[rng.randrange(len(active or own))]
        if tool in ("get_reservation_details", "cancel_reservation"):
            return {"reservation_id": rid if tool == "cancel_reservation" else own[rng.randrange(len(own))]}
        if tool == "update_reservation_baggages":
            total = rng.randint(1, 4)
            return {"reservation_id": rid, "total_baggages": total, "nonfree_baggages": rng.randint(0, total), "payment_id": self._card(user_id)}
        if tool == "update_reservation_passengers":
            return {"reservation_id": rid, "passengers": [self._self_passenger(user_id)]}
        if tool == "update_reservation_flights":
            legs = json.loads(c.execute("SELECT flights FROM reservations WHERE reservation_id=?", (rid,)).fetchone()[0])
            day = rng.randrange(TODAY + 1, DAYS)
            return {"reservation_id": rid, "cabin": rng.choice(CABINS),
                    "flights": [{"flight_number": leg["flight_number"], "date": _date(day)} for leg in legs], "payment_id": self._card(user_id)}
        raise ToolError(f"no argument rule for tool '{tool}'")

    def _card(self, user_id: str) -> str:
        methods = json.loads(self._ro.execute("SELECT payment_methods FROM users WHERE user_id=?", (user_id,)).fetchone()[0])
        return next(p for p, m in methods.items() if m["source"] == "credit_card")

    def _self_passenger(self, user_id: str) -> dict:
        first, last, dob = self._ro.execute("SELECT first_name, last_name, dob FROM users WHERE user_id=?", (user_id,)).fetchone()
        return {"first_name": first, "last_name": last, "dob": dob}

    # ------------------------------------------------------------------ tool bodies: (connection, **args) -> JSON-able result
    @staticmethod
    def _reservation(c, reservation_id: str) -> dict | str:
        row = c.execute("SELECT * FROM reservations WHERE reservation_id=?", (reservation_id,)).fetchone()
        if row is None:
            return f"Error: reservation {reservation_id} not found"
        (rid, uid, o, d, ftype, cabin, flights, pax, pay, created, bags, nonfree, ins, status) = row
        return {"reservation_id": rid, "user_id": uid, "origin": o, "destination": d, "flight_type": ftype, "cabin": cabin,
                "flights": json.loads(flights), "passengers": json.loads(pax), "payment_history": json.loads(pay),
                "created_at": created, "total_baggages": bags, "nonfree_baggages": nonfree, "insurance": ins, "status": status}

    @staticmethod
    def _flight(row) -> dict:
        num, o, d, dep, arr, date, status, sb, se, sbus, pb, pe, pbus = row
        return {"flight_number": num, "origin": o, "destination": d, "status": status, "scheduled_departure_time_est": dep,
                "scheduled_arrival_time_est": arr, "date": date,
                "available_seats": {"basic_economy": sb, "economy": se, "business": sbus},
                "prices": {"basic_economy": pb, "economy": pe, "business": pbus}}

    _FLIGHT_SQL = ("SELECT f.flight_number, f.origin, f.destination, f.departure, f.arrival, d.date, d.status, d.seats_basic_economy, "
                   "d.seats_economy, d.seats_business, d.price_basic_economy, d.price_economy, d.price_business "
                   "FROM flights f JOIN flight_dates d USING (flight_number) ")

    @staticmethod
    def _t_get_user_details(c, user_id):
        row = c.execute("SELECT * FROM users WHERE user_id=?", (user_id,)).fetchone()
        if row is None:
            return f"Error: user {user_id} not found"
        uid, first, last, address, email, dob, membership, methods, passengers = row
        rs = [r[0] for r in c.execute("SELECT reservation_id FROM reservations WHERE user_id=? ORDER BY created_at, 1", (user_id,))]
        return {"user_id": uid, "name": {"first_name": first, "last_name": last}, "address": json.loads(address), "email": email,
                "dob": dob, "payment_methods": json.loads(methods), "saved_passengers": json.loads(passengers),
                "membership": membership, "reservations": rs}

    @classmethod
    def _t_get_reservation_details(cls, c, reservation_id):
        return cls._reservation(c, reservation_id)

    @classmethod
    def _t_search_direct_flight(cls, c, origin, destination, date):
        rows = c.execute(cls._FLIGHT_SQL + "WHERE f.origin=? AND f.destination=? AND d.date=? AND d.status='available' ORDER BY 1",
                         (origin, destination, date))
        return [cls._flight(r) for r in rows]

    @classmethod
    def _t_search_onestop_flight(cls, c, origin, destination, date):
        first = [cls._flight(r) for r in c.execute(cls._FLIGHT_SQL + "WHERE f.origin=? AND d.date=? AND d.status='available' ORDER BY 1",
                                                   (origin, date))]
        out = []
        for a in first:
            for r in c.execute(cls._FLIGHT_SQL + "WHERE f.origin=? AND f.destination=? AND d.date=? AND d.status='available' "
                               "AND f.departure > ? ORDER BY 1", (a["destination"], destination, date, a["scheduled_arrival_time_est"])):
                out.append([a, cls._flight(r)])
        return out

    @staticmethod
    def _t_get_flight_status(c, flight_number, date):
        row = c.execute("SELECT status FROM flight_dates WHERE flight_number=? AND date=?", (flight_number, date)).fetchone()
        return row[0] if row else f"Error: flight {flight_number} on {date} not found"

    @staticmethod
    def _t_list_all_airports(c):
        return {code: city for code, city in c.execute("SELECT iata, city FROM airports ORDER BY 1")}

    @staticmethod
    def _t_calculate(c, expression):
        a, op, b = expression.split()
        x, y = float(a), float(b)
        return str(round(x + y if op == "+" else x - y if op == "-" else x * y, 2))

    @staticmethod
    def _t_transfer_to_human_agents(c, summary):
        c.execute("INSERT INTO transfers (user_id, summary) VALUES (NULL, ?)", (summary,))
        return "Transfer successful"

    @classmethod
    def _t_book_reservation(cls, c, user_id, origin, destination, flight_type, cabin, flights, passengers, payment_id,
                            total_baggages, nonfree_baggages, insurance):
        if cabin not in CABINS:  # also keeps the column name below one of three
            return f"Error: cabin must be one of {', '.join(CABINS)}"
        legs = []
        for f in flights:
            row = c.execute(f"SELECT price_{cabin}, seats_{cabin}, status FROM flight_dates WHERE flight_number=? AND date=?",
                            (f["flight_number"], f["date"])).fetchone()
            if row is None or row[2] != "available":
                return f"Error: flight {f['flight_number']} on {f['date']} is not available"
            legs.append({"origin": origin, "destination": destination, "flight_number": f["flight_number"], "date": f["date"], "price": row[0]})
            c.execute(f"UPDATE flight_dates SET seats_{cabin} = MAX(seats_{cabin} - ?, 0) WHERE flight_number=? AND date=?",
                      (len(passengers), f["flight_number"], f["date"]))
        n = c.execute("SELECT COUNT(*) FROM reservations").fetchone()[0]
        rid = f"N{n:05d}"
        total = sum(leg["price"] for leg in legs) * len(passengers) + (30 * len(passengers) if insurance == "yes" else 0)
        c.execute("INSERT INTO reservations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  (rid, user_id, origin, destination, flight_type, cabin, json.dumps(legs), json.dumps(passengers),
                   json.dumps([{"payment_id": payment_id, "amount": total}]), "2024-05-11T12:00:00", total_baggages,
                   nonfree_baggages, insurance, "active"))
        return cls._reservation(c, rid)

    @classmethod
    def _t_cancel_reservation(cls, c, reservation_id):
        r = cls._reservation(c, reservation_id)
        if isinstance(r, str) or r["status"] == "cancelled":
            return r if isinstance(r, str) else f"Error: reservation {reservation_id} is already cancelled"
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in r["payment_history"]]
        c.execute("UPDATE reservations SET status='cancelled', payment_history=? WHERE reservation_id=?",
                  (json.dumps(r["payment_history"] + refunds), reservation_id))
        return cls._reservation(c, reservation_id)

    @classmethod
    def _t_update_reservation_baggages(cls, c, reservation_id, total_baggages, nonfree_baggages, payment_id):
        r = cls._reservation(c, reservation_id)
        if isinstance(r, str):
            return r
        pay = r["payment_history"] + ([{"payment_id": payment_id, "amount": 50 * (nonfree_baggages - r["nonfree_baggages"])}]
                                      if nonfree_baggages > r["nonfree_baggages"] else [])
        c.execute("UPDATE reservations SET total_baggages=?, nonfree_baggages=?, payment_history=? WHERE reservation_id=?",
                  (total_baggages, nonfree_baggages, json.dumps(pay), reservation_id))
        return cls._reservation(c, reservation_id)

    @classmethod
    def _t_update_reservation_flights(cls, c, reservation_id, cabin, flights, payment_id):
        r = cls._reservation(c, reservation_id)
        if isinstance(r, str) or cabin not in CABINS:
            return r if isinstance(r, str) else f"Error: cabin must be one of {', '.join(CABINS)}"
        legs = []
        for old, f in zip(r["flights"], flights):
            row = c.execute(f"SELECT price_{cabin} FROM flight_dates WHERE flight_number=? AND date=?", (f["flight_number"], f["date"])).fetchone()
            if row is None:
                return f"Error: flight {f['flight_number']} on {f['date']} not found"
            legs.append({**old, "flight_number": f["flight_number"], "date": f["date"], "price": row[0]})
        delta = (sum(leg["price"] for leg in legs) - sum(leg["price"] for leg in r["flights"])) * len(r["passengers"])
        pay = r["payment_history"] + ([{"payment_id": payment_id, "amount": delta}] if delta else [])
        c.execute("UPDATE reservations SET cabin=?, flights=?, payment_history=? WHERE reservation_id=?",
                  (cabin, json.dumps(legs), json.dumps(pay), reservation_id))
        return cls._reservation(c, reservation_id)

    @classmethod
    def _t_update_reservation_passengers(cls, c, reservation_id, passengers):
        c.execute("UPDATE reservations SET passengers=? WHERE reservation_id=?", (json.dumps(passengers), reservation_id))
        return cls._reservation(c, reservation_id)

    @staticmethod
    def _t_send_certificate(c, user_id, amount):
        methods = json.loads(c.execute("SELECT payment_methods FROM users WHERE user_id=?", (user_id,)).fetchone()[0])
        pid = f"certificate_{len(methods) + 1000000}"
        methods[pid] = {"source": "certificate", "amount": amount, "id": pid}
        c.execute("UPDATE users SET payment_methods=? WHERE user_id=?", (json.dumps(methods), user_id))
        return f"Certificate {pid} added to user {user_id} with amount {amount}."
