"""Model configuration: the thesis's affix strings plus named numbers.

A model is named the way the thesis names its variants: affixes joined by
underscores, e.g. ``"uc_pd_jm_dp_tXiX_ps"`` (uniform-smoothed collection
background, power-law discounting combined with Jelinek-Mercer and a Dirichlet
prior, TF-IDF with length scaling and IDF lifting, prior scaling). The numbers
are passed by the names used in ``docs/MODEL.md`` (``beta``, ``mu``, ...).

:func:`parse_spec` turns the string into a :class:`ModelSpec`;
:func:`resolve_params` checks the numbers against it. Both raise
:class:`SpecError` with a message saying what is wrong and what is allowed.
The background and smoothing affixes and their numbers come from the methods
registered in :mod:`model.smoothing.registry` (their rows below are generated
from it); the others are defined here.

Affixes (MODEL.md sections 1-4, 6):

{table}
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from .params import ParamInfo, SpecError
from .smoothing import registry

BACKGROUNDS = registry.background_affixes()
SMOOTHING = registry.affixes()
#: The count discounts (the methods of the "discount" slot: at most one per spec).
DISCOUNTS = tuple(a for a in SMOOTHING if registry.method(a).slot == "discount")
KERNEL_AFFIXES = registry.kernel_affixes()
WEIGHTINGS = ("ti", "tXi", "tiX", "tXiX", "qidf", "qidfX")
FAMILIES = ("mnb", "tdm")

#: The numbers of feature weighting (MODEL.md section 3) and prior scaling (section 4).
_WEIGHTING_PARAMS = (
    ParamInfo("phi", -1.0, 2.0, 0.0, False, "TF-IDF length scaling (tXi, tXiX)", -1.0, 2.0),
    ParamInfo("ups_idf", -1.0, 50.0, 0.0, False, "IDF lifting (tiX, tXiX, qidfX); -1 = Croft-Harper", -1.0, 50.0),
    ParamInfo("theta", 0.0, 2.0, 1.0, False, "prior scaling exponent (ps)", 0.0, 2.0),
)
#: The numbers of supervised query term weights (fw; :mod:`model.term_class_weights`).
_CLASS_WEIGHT_PARAMS = (
    ParamInfo("gamma", 0.0, 50.0, 1.0, False, "fw: sharpness of the class-entropy term weight", 0.0, 6.0),
    ParamInfo("kappa", 0.0, math.inf, 1.0, True, "fw: pseudo-mass pulling class frequencies to the collection's",
              0.0001, 100.0, True),
    ParamInfo("eps", 0.0, 1.0, 0.1, False, "fw: weight floor of a term spread evenly over the classes", 0.0, 1.0),
)
#: The number of tied term weights (tw; :mod:`model.tied_weights`).
_TIED_PARAMS = (
    ParamInfo("tw_eta", 0.0, 100.0, 2.0, True, "tw: AdaGrad step of the tied term weights (a term's first step)",
              0.25, 8.0, True),
)
#: The numbers of model-based feedback (fb; :mod:`model.feedback`); labels and terms are rounded to whole numbers.
_FEEDBACK_PARAMS = (
    ParamInfo("fb_lambda", 0.0, 1.0, 0.1, False, "fb: weight of the top labels' words in the second pass", 0.0, 0.4),
    ParamInfo("fb_labels", 1.0, 1000.0, 3.0, False, "fb: top labels whose words feed back (posterior-weighted)",
              1.0, 10.0),
    ParamInfo("fb_terms", 1.0, 1e6, 100.0, False, "fb: feedback terms kept (the largest)", 5.0, 5000.0, True),
)


def _collect_params() -> dict[str, ParamInfo]:
    found: dict[str, ParamInfo] = {}
    groups = ([m.params for m in registry.METHODS] + [b.params for b in registry.BACKGROUNDS] + [_WEIGHTING_PARAMS]
              + [_CLASS_WEIGHT_PARAMS, _TIED_PARAMS, _FEEDBACK_PARAMS]
              + [registry.kernel_method(k).kernel_params for k in KERNEL_AFFIXES])
    for info in (info for group in groups for info in group):
        if found.setdefault(info.name, info) != info:
            raise RuntimeError(f"two different numbers named {info.name!r}")
    return found


#: Every number a configuration can carry; defaults are the ones documented in docs/MODEL.md.
PARAMS: dict[str, ParamInfo] = _collect_params()


def _affix_table() -> str:
    rows = [("mnb/tdm", "model family prefix (optional for MNB)")]
    rows += [(b.affix, f"background model: {b.doc}") for b in registry.BACKGROUNDS]
    rows += [(m.affix, m.doc) for m in registry.METHODS]
    rows += [("ti", "TF-IDF on training and scored documents (phi=0, ups_idf=0 fixed)"),
             ("tXi", "TF-IDF with length scaling ``phi`` free"), ("tiX", "TF-IDF with IDF lifting ``ups_idf`` free"),
             ("tXiX", "both free"), ("qidf", "IDF weighting of scored documents only (ups_idf=0 fixed)"),
             ("qidfX", "query IDF with lifting ``ups_idf`` free"),
             ("fw", "supervised weights of scored terms from their class distribution (``gamma``, ``kappa``, ``eps``)"),
             ("tw", "tied term weights: one factor per scored term, learned online by AdaGrad (``tw_eta``; MNB only)"),
             ("fb", "model-based feedback: a second pass with the top labels' words mixed in (``fb_lambda``, "
                    "``fb_labels``, ``fb_terms``)"),
             ("ps", "prior scaling ``theta``")]
    rows += [(k, f"TDM document kernel: {registry.kernel_method(k).doc}, number "
                 f"{', '.join(f'``{p.name}``' for p in registry.kernel_method(k).kernel_params)} (TDM only)")
             for k in KERNEL_AFFIXES]
    width = max(len(a) for a, _ in rows)
    rule = "=" * width + " " + "=" * 63
    return "\n".join([rule, f"{'affix':<{width}} meaning", rule, *(f"{a:<{width}} {d}" for a, d in rows), rule])


__doc__ = __doc__.format(table=_affix_table())


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
    #: smoothing affixes in canonical order (the order their discounts apply in)
    smoothing: tuple[str, ...]
    weighting: str | None
    prior_scaling: bool
    kernel: frozenset[str] = field(default_factory=frozenset)
    #: fw: scored terms weighted by how unevenly the classes hold them (:mod:`model.term_class_weights`)
    class_weights: bool = False
    #: fb: a second scoring pass with the top labels' words mixed in (:mod:`model.feedback`)
    feedback: bool = False
    #: tw: one factor per scored term, tied across labels, learned online (:mod:`model.tied_weights`)
    tied_weights: bool = False

    @property
    def name(self) -> str:
        """Canonical affix string (family first, fixed affix order)."""
        parts = [self.family, self.background, *self.smoothing]
        parts.extend(k for k in KERNEL_AFFIXES if k in self.kernel)
        if self.weighting:
            parts.append(self.weighting)
        if self.class_weights:
            parts.append("fw")
        if self.tied_weights:
            parts.append("tw")
        if self.feedback:
            parts.append("fb")
        if self.prior_scaling:
            parts.append("ps")
        return "_".join(parts)

    @property
    def free_params(self) -> frozenset[str]:
        """The numbers this configuration reads (others are rejected)."""
        groups = [registry.method(a).params for a in self.smoothing]
        groups.append(registry.background(self.background).params)
        groups += [registry.kernel_method(k).kernel_params for k in self.kernel]
        names = {info.name for group in groups for info in group}
        if self.weighting in ("tXi", "tXiX"):
            names.add("phi")
        if self.weighting in ("tiX", "tXiX", "qidfX"):
            names.add("ups_idf")
        if self.prior_scaling:
            names.add("theta")
        if self.class_weights:
            names.update(info.name for info in _CLASS_WEIGHT_PARAMS)
        if self.tied_weights:
            names.update(info.name for info in _TIED_PARAMS)
        if self.feedback:
            names.update(info.name for info in _FEEDBACK_PARAMS)
        return frozenset(names)

    # Views by slot and affix, for readers of the parsed fields (the dense references in tests/).
    @property
    def discount(self) -> str | None:
        """The count discount affix (``"ad"``, ``"pd"``: the methods of the "discount" slot) or ``None``."""
        return next((a for a in self.smoothing if registry.method(a).slot == "discount"), None)

    @property
    def jm(self) -> bool:
        return "jm" in self.smoothing

    @property
    def dp(self) -> bool:
        return "dp" in self.smoothing

    @property
    def linear_discount(self) -> bool:
        """True when the label-level discount is homogeneous of degree one (no ad/pd)."""
        return all(getattr(registry.method(a), "linear", True) for a in self.smoothing)


def _either(options: tuple[str, ...], last: str) -> str:
    return ", ".join(options[:-1]) + f" {last} " + options[-1] if len(options) > 1 else "".join(options)


def parse_spec(text: str) -> ModelSpec:
    """Parse an affix string such as ``"uc_pd_jm_dp_tXiX_ps"`` or ``"tdm_uc_jm_dp_kpd_kdp"``."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError("a model spec is a non-empty affix string such as 'uc_pd_jm_dp_tXiX_ps'")
    affixes = [a for a in text.strip().split("_") if a]
    family = "mnb"
    if affixes and affixes[0] in FAMILIES:
        family = affixes.pop(0)
    known = set(BACKGROUNDS) | set(SMOOTHING) | {"ps", "fw", "tw", "fb"} | set(WEIGHTINGS) | set(KERNEL_AFFIXES)
    unknown = [a for a in affixes if a not in known]
    if unknown:
        raise SpecError(
            f"unknown affix(es) {unknown} in {text!r}; known: backgrounds {BACKGROUNDS}, "
            f"smoothing {' '.join(SMOOTHING)}, weighting {WEIGHTINGS}, fw, tw, fb, ps, TDM kernels {KERNEL_AFFIXES}"
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
    for options, lookup in ((SMOOTHING, registry.method), (KERNEL_AFFIXES, registry.kernel_method)):
        slots: dict[str, tuple[str, ...]] = {}
        for affix in options:
            slots[lookup(affix).slot] = slots.get(lookup(affix).slot, ()) + (affix,)
        for slot, members in slots.items():  # methods of one slot exclude each other
            if len(members) > 1:
                pick(members, f"{slot} ({_either(members, 'or')})")
    weighting = pick(WEIGHTINGS, "feature weighting")
    smoothing = tuple(sorted((a for a in affixes if a in SMOOTHING), key=lambda a: registry.method(a).order))
    if not smoothing:
        raise SpecError(f"{text!r} needs a smoothing affix ({_either(SMOOTHING, 'or')}); "
                        "unsmoothed models give zero probabilities")
    kernel = frozenset(a for a in affixes if a in KERNEL_AFFIXES)
    if family == "mnb" and kernel:
        raise SpecError(f"kernel affixes {sorted(kernel)} are for TDM: prefix the spec with 'tdm_'")
    if family == "tdm" and "tw" in affixes:
        raise SpecError(f"{text!r}: tied term weights (tw) are for MNB (their step follows the MNB's label score)")
    if family == "tdm" and not kernel:
        raise SpecError(f"{text!r}: a TDM needs kernel smoothing ({_either(KERNEL_AFFIXES, 'and/or')})")
    return ModelSpec(family, background, smoothing, weighting, "ps" in affixes, kernel, "fw" in affixes,
                     "fb" in affixes, "tw" in affixes)


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
        if PARAMS[name].kneser_ney and isinstance(value, str) and value.strip().lower() == "kn":
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
