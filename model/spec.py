"""Model configuration: the thesis's affix strings plus named numbers.

A model is named the way the thesis names its variants: affixes joined by
underscores, e.g. ``"uc_pd_jm_dp_tXiX_ps"`` (uniform-smoothed collection
background, power-law discounting combined with Jelinek-Mercer and a Dirichlet
prior, TF-IDF with length scaling and IDF lifting, prior scaling). The numbers
are passed by the names used in ``docs/MODEL.md`` (``beta``, ``mu``, ...).

:func:`parse_spec` turns the string into a :class:`ModelSpec`;
:func:`resolve_params` checks the numbers against it. Both raise
:class:`SpecError` with a message saying what is wrong and what is allowed.

Affixes (MODEL.md sections 1-4, 6):

======== ===============================================================
affix    meaning
======== ===============================================================
mnb/tdm  model family prefix (optional for MNB)
u c uc   background model: uniform, collection, uniform-smoothed collection
jm       Jelinek-Mercer: linear discount ``beta * C``
dp       Dirichlet prior mass ``mu``
ad       absolute discounting ``min(delta, C)``
pd       power-law discounting ``min(C, delta * C**delta)``
ti       TF-IDF on training and scored documents (phi=0, ups_idf=0 fixed)
tXi      TF-IDF with length scaling ``phi`` free
tiX      TF-IDF with IDF lifting ``ups_idf`` free
tXiX     both free
qidf     IDF weighting of scored documents only (ups_idf=0 fixed)
qidfX    query IDF with lifting ``ups_idf`` free
ps       prior scaling ``theta``
kjm kdp  TDM kernel smoothing: Jelinek-Mercer ``kbeta``, Dirichlet ``kmu``,
kpd      power-law ``kdelta`` (TDM only)
======== ===============================================================
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping


class SpecError(ValueError):
    """An unknown affix, an impossible combination or an out-of-range number."""


BACKGROUNDS = ("u", "c", "uc")
DISCOUNTS = ("ad", "pd")
WEIGHTINGS = ("ti", "tXi", "tiX", "tXiX", "qidf", "qidfX")
KERNEL_AFFIXES = ("kjm", "kdp", "kpd")
FAMILIES = ("mnb", "tdm")


@dataclass(frozen=True)
class ParamInfo:
    """One tunable number: its allowed range, default and meaning."""

    name: str
    low: float
    high: float
    default: float
    low_open: bool
    doc: str
    #: range used by ``sgm tune`` (a finite sub-range of the allowed one)
    tune_low: float
    tune_high: float
    log_scale: bool = False

    def check(self, value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise SpecError(f"{self.name} must be a number, got {value!r}") from None
        if math.isnan(number):
            raise SpecError(f"{self.name} must be a number, got NaN")
        too_low = number <= self.low if self.low_open else number < self.low
        if too_low or number > self.high:
            left = "(" if self.low_open else "["
            raise SpecError(f"{self.name}={number!r} is outside {left}{self.low}, {self.high}]: {self.doc}")
        return number


INF = math.inf

#: Every number a configuration can carry; defaults are the ones documented in docs/MODEL.md.
PARAMS: dict[str, ParamInfo] = {
    p.name: p
    for p in (
        ParamInfo("beta", 0.0, 1.0, 0.5, True, "Jelinek-Mercer discount fraction (jm)", 0.01, 1.0),
        ParamInfo("mu", 0.0, INF, 100.0, True, "Dirichlet prior mass (dp)", 0.1, 10000.0, True),
        ParamInfo("delta", 0.0, 1.0, 0.5, True, "absolute/power-law discount (ad, pd); 'kn' = Kneser-Ney estimate", 0.01, 1.0),
        ParamInfo("ups", 0.0, 1.0, 0.5, False, "uniform weight in the uc background", 0.0, 1.0),
        ParamInfo("phi", -1.0, 2.0, 0.0, False, "TF-IDF length scaling (tXi, tXiX)", -1.0, 2.0),
        ParamInfo("ups_idf", -1.0, 50.0, 0.0, False, "IDF lifting (tiX, tXiX, qidfX); -1 = Croft-Harper", -1.0, 50.0),
        ParamInfo("theta", 0.0, 10.0, 1.0, False, "prior scaling exponent (ps)", 0.0, 2.0),
        ParamInfo("kbeta", 0.0, 1.0, 0.5, True, "TDM kernel Jelinek-Mercer fraction (kjm)", 0.01, 1.0),
        ParamInfo("kmu", 0.0, INF, 10.0, True, "TDM kernel Dirichlet mass (kdp)", 0.01, 1000.0, True),
        ParamInfo("kdelta", 0.0, 1.0, 0.5, True, "TDM kernel power-law discount (kpd)", 0.01, 1.0),
    )
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed affix string.

    Examples
    --------
    >>> spec = parse_spec("uc_pd_jm_dp_tXiX_ps")
    >>> spec.background, spec.discount, spec.jm, spec.dp, spec.weighting, spec.prior_scaling
    ('uc', 'pd', True, True, 'tXiX', True)
    >>> sorted(spec.free_params)
    ['beta', 'delta', 'mu', 'phi', 'theta', 'ups', 'ups_idf']
    >>> spec.name
    'mnb_uc_pd_jm_dp_tXiX_ps'
    """

    family: str
    background: str
    discount: str | None  # "ad" | "pd" | None
    jm: bool
    dp: bool
    weighting: str | None
    prior_scaling: bool
    kernel: frozenset[str] = field(default_factory=frozenset)

    @property
    def name(self) -> str:
        """Canonical affix string (family first, fixed affix order)."""
        parts = [self.family, self.background]
        if self.discount:
            parts.append(self.discount)
        if self.jm:
            parts.append("jm")
        if self.dp:
            parts.append("dp")
        parts.extend(k for k in KERNEL_AFFIXES if k in self.kernel)
        if self.weighting:
            parts.append(self.weighting)
        if self.prior_scaling:
            parts.append("ps")
        return "_".join(parts)

    @property
    def free_params(self) -> frozenset[str]:
        """The numbers this configuration reads (others are rejected)."""
        names = set()
        if self.jm:
            names.add("beta")
        if self.dp:
            names.add("mu")
        if self.discount:
            names.add("delta")
        if self.background == "uc":
            names.add("ups")
        if self.weighting in ("tXi", "tXiX"):
            names.add("phi")
        if self.weighting in ("tiX", "tXiX", "qidfX"):
            names.add("ups_idf")
        if self.prior_scaling:
            names.add("theta")
        if "kjm" in self.kernel:
            names.add("kbeta")
        if "kdp" in self.kernel:
            names.add("kmu")
        if "kpd" in self.kernel:
            names.add("kdelta")
        return frozenset(names)

    @property
    def linear_discount(self) -> bool:
        """True when the label-level discount is homogeneous of degree one (no ad/pd)."""
        return self.discount is None


def parse_spec(text: str) -> ModelSpec:
    """Parse an affix string such as ``"uc_pd_jm_dp_tXiX_ps"`` or ``"tdm_uc_jm_dp_kpd_kdp"``."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError("a model spec is a non-empty affix string such as 'uc_pd_jm_dp_tXiX_ps'")
    affixes = [a for a in text.strip().split("_") if a]
    family = "mnb"
    if affixes and affixes[0] in FAMILIES:
        family = affixes.pop(0)
    known = set(BACKGROUNDS) | set(DISCOUNTS) | {"jm", "dp", "ps"} | set(WEIGHTINGS) | set(KERNEL_AFFIXES)
    unknown = [a for a in affixes if a not in known]
    if unknown:
        raise SpecError(
            f"unknown affix(es) {unknown} in {text!r}; known: backgrounds {BACKGROUNDS}, smoothing jm dp ad pd, "
            f"weighting {WEIGHTINGS}, ps, TDM kernels {KERNEL_AFFIXES}"
        )
    if len(set(affixes)) != len(affixes):
        raise SpecError(f"repeated affix in {text!r}")

    def pick(options: tuple[str, ...], what: str) -> str | None:
        found = [a for a in affixes if a in options]
        if len(found) > 1:
            raise SpecError(f"{text!r} names more than one {what}: {found}")
        return found[0] if found else None

    background = pick(BACKGROUNDS, "background model")
    if background is None:
        raise SpecError(f"{text!r} needs a background model affix: one of {BACKGROUNDS}")
    discount = pick(DISCOUNTS, "discount (ad or pd)")
    weighting = pick(WEIGHTINGS, "feature weighting")
    jm, dp = "jm" in affixes, "dp" in affixes
    if not (jm or dp or discount):
        raise SpecError(f"{text!r} needs a smoothing affix (jm, dp, ad or pd); unsmoothed models give zero probabilities")
    kernel = frozenset(a for a in affixes if a in KERNEL_AFFIXES)
    if family == "mnb" and kernel:
        raise SpecError(f"kernel affixes {sorted(kernel)} are for TDM: prefix the spec with 'tdm_'")
    if family == "tdm" and not kernel:
        raise SpecError(f"{text!r}: a TDM needs kernel smoothing (kjm, kdp and/or kpd)")
    return ModelSpec(family, background, discount, jm, dp, weighting, "ps" in affixes, kernel)


#: Numbers that are not affix parameters but still configure a model.
OTHER_PARAMS = ("half_life",)


def resolve_params(spec: ModelSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``given`` against ``spec`` and fill defaults.

    Returns a dict holding every free parameter of ``spec``. ``delta`` (and
    ``kdelta``) may be the string ``"kn"`` for the Kneser-Ney estimate.

    >>> resolve_params(parse_spec("u_jm"), {"beta": 0.3})
    {'beta': 0.3}
    >>> resolve_params(parse_spec("u_jm"), {"mu": 10})
    Traceback (most recent call last):
    ...
    sgm.model.spec.SpecError: parameter 'mu' is not used by 'mnb_u_jm' (it reads: beta)
    """
    free = spec.free_params
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name not in PARAMS:
            raise SpecError(f"unknown parameter {name!r}; known: {sorted(PARAMS)}")
        if name not in free:
            raise SpecError(
                f"parameter {name!r} is not used by {spec.name!r} (it reads: {', '.join(sorted(free)) or 'nothing'})"
            )
        if name in ("delta", "kdelta") and isinstance(value, str) and value.strip().lower() == "kn":
            out[name] = "kn"
            continue
        out[name] = PARAMS[name].check(value)
    for name in free:
        out.setdefault(name, PARAMS[name].default)
    return dict(sorted(out.items()))


def check_half_life(value: Any) -> float | None:
    """``None`` (no decay) or a positive, finite half-life in event-time units (seconds)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"half_life must be a positive number of seconds or None, got {value!r}") from None
    if not (number > 0 and math.isfinite(number)):
        raise SpecError(f"half_life must be positive and finite, got {value!r}")
    return number
