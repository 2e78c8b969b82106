"""Every smoothing method and background, by affix: the spec grammar (:mod:`model.spec`) is read from here.

Adding a smoothing method is one class in a file of this package (see
:mod:`.contract`), listed in :data:`METHODS`, plus its tests.
"""
from __future__ import annotations

from .absolute import AbsoluteDiscount
from .backgrounds import Collection, Uniform, UniformCollection
from .contract import Background, Method
from .dirichlet import DirichletMass
from .jelinek_mercer import JelinekMercer
from .power_law import PowerLawDiscount

#: Smoothing methods in the order the grammar lists them (error messages, parameter table).
METHODS: tuple[type[Method], ...] = (JelinekMercer, DirichletMass, AbsoluteDiscount, PowerLawDiscount)
#: Background models: a spec names exactly one.
BACKGROUNDS: tuple[type[Background], ...] = (Uniform, Collection, UniformCollection)
#: Prefix of a method's affix in its TDM document-kernel form ("kjm").
KERNEL_PREFIX = "k"

_BY_AFFIX = {m.affix: m for m in METHODS}
_BACKGROUND_BY_AFFIX = {b.affix: b for b in BACKGROUNDS}
_BY_KERNEL_AFFIX = {KERNEL_PREFIX + m.affix: m for m in METHODS if m.kernel_params is not None}
assert len(_BY_AFFIX) == len(METHODS) and not set(_BY_AFFIX) & set(_BACKGROUND_BY_AFFIX), "affixes must be distinct"


def method(affix: str) -> type[Method]:
    """The smoothing method named by ``affix`` (``KeyError`` if none)."""
    return _BY_AFFIX[affix]


def kernel_method(affix: str) -> type[Method]:
    """The smoothing method whose document-kernel form ``affix`` names ("kpd" -> power-law)."""
    return _BY_KERNEL_AFFIX[affix]


def background(affix: str) -> type[Background]:
    """The background model named by ``affix``."""
    return _BACKGROUND_BY_AFFIX[affix]


def affixes() -> tuple[str, ...]:
    """Smoothing affixes in grammar order: ``('jm', 'dp', 'ad', 'pd')``."""
    return tuple(_BY_AFFIX)


def kernel_affixes() -> tuple[str, ...]:
    """Document-kernel affixes in grammar order: ``('kjm', 'kdp', 'kpd')``."""
    return tuple(_BY_KERNEL_AFFIX)


def background_affixes() -> tuple[str, ...]:
    """Background affixes: ``('u', 'c', 'uc')``."""
    return tuple(_BACKGROUND_BY_AFFIX)
