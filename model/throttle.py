"""The intra-broker move throttle (KIP-113 "Broker Config"), as a checked model: THROTTLE_BOUND.

What is modelled (``impl/storage/throttle.py``): one token bucket shared by two movers over a
virtual clock. The bucket holds no credit beyond zero; a mover may start a chunk when the bucket
is not in debt (``checked``), then copies it and charges it (``chunk_copied``), putting the bucket
into debt that refills at the rate each tick (``ticked``); the rate may change while movers run
(``rate_changed``, debt kept). Because a mover checks and charges in two steps, every mover may be
between the two at once: hence one chunk per mover on top of the rate.

THROTTLE_BOUND is about *every* window, so the model opens one window at a time of its own
choosing (``window_opened``, any number of times, from any state): the checker explores every
choice, so the bound, checked against the open window's counters, covers all windows.

Known-bad variants: ``rate_change_refills`` (a rate change resets the bucket to a full bucket of
credit) and ``charge_once_per_check`` (a mover checks the budget once and copies chunk after chunk
without charging each against a bound).
"""

from __future__ import annotations

from collections.abc import Mapping

from ._dsl import Bool, Int, Model, ModelDefinition, Ops, State, Status, Term, Transition, Variant

__sans_io__ = True

#: The movers sharing the bucket.
MOVERS = (0, 1)
#: Bytes per chunk.
CHUNK_BYTES = 2
#: The rates the operator may set, in bytes per tick.
RATES_BYTES_PER_TICK = (1, 2)
#: Ticks of the virtual clock the model explores.
TICKS_MAX = 6
#: Room for the window counters.
BYTES_MAX = 40
#: The bound's slack: one chunk per mover.
SLACK_BYTES = CHUNK_BYTES * len(MOVERS)

#: The strengthening: the window's exact accounting and the debt bound.
LEMMAS = ("BUCKET_ACCOUNTING",)


def build(variant: Variant) -> Model:
    """The throttle model; flags ``refill_on_rate_change``, ``charge_once`` (default false)."""
    refill_on_change = bool(variant.flags.get("refill_on_rate_change", False))
    charge_once = bool(variant.flags.get("charge_once", False))
    m = Model("throttle", __doc__ or "")
    m.var("now_ticks", Int(0, TICKS_MAX), doc="the virtual clock")
    m.var("rate_bytes_per_tick", Int(min(RATES_BYTES_PER_TICK), max(RATES_BYTES_PER_TICK)),
          doc="intra.broker.throttled.rate")
    m.var("tokens_bytes", Int(-BYTES_MAX, BYTES_MAX), doc="bucket level (negative: debt)")
    m.var("ready", Bool(), over=[MOVERS], doc="the mover saw no debt and may copy a chunk")
    m.var("window_open", Bool(), doc="ghost: a window is being measured")
    m.var("window_bytes", Int(0, BYTES_MAX), doc="ghost: bytes copied in the window")
    m.var("window_allowance_bytes", Int(0, BYTES_MAX), doc="ghost: rate times time in the window")
    m.var("window_refill_bytes", Int(0, BYTES_MAX), doc="ghost: tokens actually refilled")
    m.var("window_start_tokens", Int(-BYTES_MAX, BYTES_MAX), doc="ghost: level at its start")

    @m.init(params={"rate": RATES_BYTES_PER_TICK})
    def init(o: Ops, rate: int) -> Mapping[str, Term]:
        return {
            "now_ticks": 0, "rate_bytes_per_tick": rate, "tokens_bytes": 0, "ready": False,
            "window_open": False, "window_bytes": 0, "window_allowance_bytes": 0,
            "window_refill_bytes": 0, "window_start_tokens": 0,
        }

    @m.action(modifies=["window_open", "window_bytes", "window_allowance_bytes",
                        "window_refill_bytes", "window_start_tokens"])
    def window_opened(o: Ops, s: State) -> Transition:
        """Start measuring a new window here (ghost)."""
        return Transition(True, {
            "window_open": True, "window_bytes": 0, "window_allowance_bytes": 0,
            "window_refill_bytes": 0, "window_start_tokens": s.tokens_bytes,
        })

    @m.action(modifies=["ready"], params={"mover": MOVERS})
    def checked(o: Ops, s: State, mover: int) -> Transition:
        """The mover asks the bucket: it may go when the bucket is not in debt."""
        guard = o.And(o.Not(s.ready[mover]), s.tokens_bytes >= 0)
        return Transition(guard, {"ready": {mover: True}})

    @m.action(modifies=["ready", "tokens_bytes", "window_bytes"], params={"mover": MOVERS})
    def chunk_copied(o: Ops, s: State, mover: int) -> Transition:
        """The mover copies one chunk and charges it to the bucket."""
        guard = o.And(s.ready[mover], s.window_bytes + CHUNK_BYTES <= BYTES_MAX,
                      s.tokens_bytes - CHUNK_BYTES >= -BYTES_MAX)
        update: dict[str, Term] = {
            "window_bytes": o.If(s.window_open, s.window_bytes + CHUNK_BYTES, s.window_bytes),
        }
        if charge_once:
            update["tokens_bytes"] = o.If(s.tokens_bytes >= 0, s.tokens_bytes - CHUNK_BYTES,
                                          s.tokens_bytes)
        else:
            update["tokens_bytes"] = s.tokens_bytes - CHUNK_BYTES
            update["ready"] = {mover: False}
        return Transition(guard, update)

    @m.action(modifies=["now_ticks", "tokens_bytes", "window_allowance_bytes",
                        "window_refill_bytes"])
    def ticked(o: Ops, s: State) -> Transition:
        """One tick of the virtual clock: the debt shrinks by the rate (never beyond zero)."""
        rate = s.rate_bytes_per_tick
        refilled = o.Min(0, s.tokens_bytes + rate)
        guard = o.And(s.now_ticks < TICKS_MAX,
                      s.window_allowance_bytes + rate <= BYTES_MAX)
        return Transition(guard, {
            "now_ticks": s.now_ticks + 1,
            "tokens_bytes": o.If(s.tokens_bytes >= 0, s.tokens_bytes, refilled),
            "window_allowance_bytes": o.If(s.window_open, s.window_allowance_bytes + rate,
                                           s.window_allowance_bytes),
            "window_refill_bytes": o.If(
                o.And(s.window_open, s.tokens_bytes < 0),
                s.window_refill_bytes + (refilled - s.tokens_bytes), s.window_refill_bytes),
        })

    @m.action(modifies=["rate_bytes_per_tick", "tokens_bytes", "window_refill_bytes"],
              params={"rate": RATES_BYTES_PER_TICK})
    def rate_changed(o: Ops, s: State, rate: int) -> Transition:
        """The operator changes the rate while movers run; the debt is kept."""
        if not refill_on_change:
            return Transition(s.rate_bytes_per_tick != rate, {"rate_bytes_per_tick": rate})
        full = rate * len(MOVERS)
        room = o.Or(o.Not(s.window_open),
                    s.window_refill_bytes + (full - s.tokens_bytes) <= BYTES_MAX)
        return Transition(o.And(s.rate_bytes_per_tick != rate, room), {
            "rate_bytes_per_tick": rate, "tokens_bytes": full,
            "window_refill_bytes": o.If(s.window_open,
                                        s.window_refill_bytes + (full - s.tokens_bytes),
                                        s.window_refill_bytes),
        })

    @m.invariant("THROTTLE_BOUND", supports=LEMMAS)
    def throttle_bound(o: Ops, s: State) -> Term:
        """Bytes moved in any window ≤ rate * window + one chunk per mover."""
        return s.window_bytes <= s.window_allowance_bytes + SLACK_BYTES

    @m.lemma("BUCKET_ACCOUNTING", supports=LEMMAS)
    def bucket_accounting(o: Ops, s: State) -> Term:
        """No credit beyond zero; each mover between check and charge adds at most one chunk of
        debt; the window's bytes are exactly what the bucket paid out; refill ≤ allowance."""
        waiting = o.Count(*[s.ready[mover] for mover in MOVERS])
        window = o.And(
            s.window_start_tokens <= 0,
            s.window_bytes == s.window_start_tokens + s.window_refill_bytes - s.tokens_bytes,
            s.window_refill_bytes <= s.window_allowance_bytes,
        )
        closed = o.And(s.window_bytes == 0, s.window_allowance_bytes == 0,
                       s.window_refill_bytes == 0)
        return o.And(
            s.tokens_bytes <= 0,
            s.tokens_bytes >= -CHUNK_BYTES * (len(MOVERS) - waiting),
            o.If(s.window_open, window, closed),
        )

    @m.witness("BOTH_MOVERS_IN_DEBT")
    def both_movers_in_debt(o: Ops, s: State) -> Term:
        """Both movers charged a chunk while the bucket was at zero, inside a measured window."""
        return o.And(s.window_open, s.tokens_bytes == -SLACK_BYTES,
                     s.window_bytes == SLACK_BYTES)

    return m


MODELS = (
    ModelDefinition(
        name="throttle",
        doc="THROTTLE_BOUND: one token bucket shared by the movers over a virtual clock",
        build=build,
        variants=(
            Variant("shipped", "debt-based bucket, no credit, rate change keeps the debt",
                    shipped=True, expected={"THROTTLE_BOUND": Status.PROVED}),
            Variant("rate_change_refills", "a rate change resets the bucket to full credit",
                    {"refill_on_rate_change": True},
                    expected={"THROTTLE_BOUND": Status.VIOLATED}),
            Variant("charge_once_per_check",
                    "a mover checks once, then copies chunk after chunk without a bound",
                    {"charge_once": True}, expected={"THROTTLE_BOUND": Status.VIOLATED}),
        ),
        depth=10,
        source="KIP-113 Broker Config (intra.broker.throttled.rate)",
    ),
)
