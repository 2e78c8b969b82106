"""One email as a document: :class:`Message`, the raw bytes every model accepts beside text and term counts.

A model turns a message into terms with its own :class:`~sgm.model.mail.MailFeatures`
(the ``mail`` options of its configuration), where it turns text into terms with
its tokenizer; everything after that (learning, the one scoring kernel,
snapshots) is the same as for any other document. A message learned without
an id gets a hash of its bytes as its id (:meth:`Message.anonymous_id`).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

__all__ = ["Message"]


@dataclass(frozen=True, slots=True)
class Message:
    """An email message exactly as received (RFC 5322 / MIME bytes), immutable.

    Parameters
    ----------
    raw : bytes
        The message bytes (``bytearray`` and ``memoryview`` are copied to ``bytes``).

    Examples
    --------
    >>> from sgm.model import MNB
    >>> spam = Message(b"Subject: cheap pills\\n\\nbuy now at http://pills.example/")
    >>> ham = Message(b"Subject: lunch\\nIn-Reply-To: <a@b.org>\\n\\nsee you at noon")
    >>> m = MNB("uc_jm_dp_ps")
    >>> m.learn_one(spam, "spam"), m.learn_one(ham, "ham")
    (True, True)
    >>> m.predict_one(Message(b"Subject: pills\\n\\nhttp://pills.example/buy"))
    'spam'
    >>> spam.anonymous_id() in m, len(spam), spam
    (True, 54, Message(54 bytes, blake2b e69e3b706875...))
    >>> Message.from_base64("U3ViamVjdDogaGk=").raw
    b'Subject: hi'
    """

    raw: bytes

    def __post_init__(self) -> None:
        if isinstance(self.raw, (bytearray, memoryview)):
            object.__setattr__(self, "raw", bytes(self.raw))
        elif not isinstance(self.raw, bytes):
            raise TypeError(f"a Message holds bytes, got {type(self.raw).__name__}")

    @classmethod
    def from_base64(cls, text: str | bytes) -> "Message":
        """A message from standard base64 (RFC 4648 alphabet, padded, no whitespace); ``ValueError`` otherwise.

        >>> Message.from_base64("not base64!")
        Traceback (most recent call last):
        ...
        ValueError: not standard base64: Only base64 data is allowed
        """
        try:
            return cls(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"not standard base64: {exc}") from None

    def to_base64(self) -> str:
        """The standard base64 of the bytes (what a ``raw_b64`` record field carries)."""
        return base64.b64encode(self.raw).decode("ascii")

    def anonymous_id(self) -> str:
        """The id of this message when it is learned without one: a hash of its bytes."""
        return "anon:mail:" + hashlib.blake2b(self.raw, digest_size=16).hexdigest()

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:  # the bytes can be large: name them by size and hash
        return f"Message({len(self.raw)} bytes, blake2b {self.anonymous_id()[10:22]}...)"
