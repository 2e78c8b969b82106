"""Readable evaluation reports: the headline measures, a per-class table, a confusion matrix.

Built from the per-document outcomes of :mod:`sgm.consumers.evaluation.harness`
(true and output label sets). Per class (a label; a label set in powerset
mode counts under each of its labels): precision ``TP / (TP + FP)``, recall
``TP / (TP + FN)``, F1 and support (documents truly of the label). The
confusion matrix needs one true and one output class per document
(single-label data, or powerset mode, where a class is a label set): rows
are true classes, columns output classes, most frequent first. It is printed
for up to :data:`MAX_MATRIX_LABELS` classes (``--json`` keeps it up to
:data:`MAX_JSON_LABELS`).

Examples
--------
>>> truth = [{"spam"}, {"spam"}, {"ham"}, {"ham"}, {"ham"}]
>>> output = [{"spam"}, {"ham"}, {"ham"}, {"ham"}, {"spam"}]
>>> [(row["label"], row["precision"], row["recall"], row["support"]) for row in per_class(truth, output)]
[('ham', 0.6666666666666666, 0.6666666666666666, 3), ('spam', 0.5, 0.5, 2)]
>>> print(format_matrix(*confusion(truth, output)))
true \\ output    ham  spam
ham                2     1
spam               1     1
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from . import measures as metrics

__all__ = ["MAX_JSON_LABELS", "MAX_MATRIX_LABELS", "confusion", "format_matrix", "format_report", "per_class"]

#: Classes up to which the text report prints the confusion matrix.
MAX_MATRIX_LABELS = 30
#: Classes up to which the JSON report keeps the confusion matrix.
MAX_JSON_LABELS = 200
HEADLINE = (("accuracy", "accuracy"), ("micro_f1", "micro-F1"), ("macro_f1", "macro-F1"), ("log_loss", "log loss"),
            ("roc_auc", "ROC AUC"), ("one_minus_roca_pct", "1-ROCA%"))


def per_class(true_sets: Sequence[frozenset], predicted_sets: Sequence[frozenset]) -> list[dict[str, Any]]:
    """Per label: precision, recall, F1 (``None`` where a denominator is 0), support, output count;
    most supported first (ties by name)."""
    rows = []
    for label, (tp, fp, fn) in metrics.label_counts(true_sets, predicted_sets).items():
        precision = tp / (tp + fp) if tp + fp else None
        recall = tp / (tp + fn) if tp + fn else None
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
        rows.append({"label": label, "precision": precision, "recall": recall, "f1": f1, "support": tp + fn,
                     "predicted": tp + fp})
    rows.sort(key=lambda row: (-row["support"], str(row["label"])))
    return rows


def _class(labels: frozenset) -> str | None:
    if len(labels) == 1:
        return next(iter(labels))
    return "+".join(sorted(labels)) if labels else None


def confusion(true_sets: Sequence[frozenset], predicted_sets: Sequence[frozenset],
              powerset: bool = False) -> tuple[list[str], list[list[int]]] | None:
    """``(classes, counts[true][output])``, or ``None`` when a document has several output labels and the
    model is not in powerset mode (no single output class)."""
    pairs = []
    for truth, output in zip(true_sets, predicted_sets):
        if not powerset and (len(truth) != 1 or len(output) != 1):
            return None
        pairs.append((_class(truth) or "(none)", _class(output) or "(none)"))
    support = Counter(t for t, _ in pairs)
    classes = sorted(support.keys() | {o for _, o in pairs}, key=lambda c: (-support[c], c))
    index = {c: i for i, c in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for truth, output in pairs:
        matrix[index[truth]][index[output]] += 1
    return classes, matrix


def format_matrix(classes: list[str], matrix: list[list[int]]) -> str:
    """Rows are true classes; columns are named when the names are short, else numbered (the legend is the rows)."""
    short = all(len(c) <= 8 for c in classes)
    heads = classes if short else [str(i + 1) for i in range(len(classes))]
    rows = classes if short else [f"{i + 1:>2} {c}" for i, c in enumerate(classes)]
    width = max([len(h) for h in heads] + [len(str(v)) for row in matrix for v in row]) + 2
    first = max([len(r) for r in rows] + [len("true \\ output")]) + 1
    lines = ["true \\ output".ljust(first) + "".join(h.rjust(width) for h in heads)]
    lines += [r.ljust(first) + "".join(str(v).rjust(width) for v in row) for r, row in zip(rows, matrix)]
    return "\n".join(line.rstrip() for line in lines)


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _decisions(report: Mapping[str, Any]) -> str:
    """Two-label data: the error rates of the decisions (the spam threshold and learn guards, or the arg-max)."""
    decision = report.get("decision")
    weight = f", prior weight {decision['prior_weight']:g}" if decision and "prior_weight" in decision else ""
    rule = (f"threshold {decision['threshold']:g}, min_spam {decision['min_spam']}, min_ham {decision['min_ham']}"
            f"{weight}: not_ready {decision['not_ready']}" if decision else "arg-max")
    line = (f"decisions ({rule}): FP rate {_number(report.get('fp_rate_pct'), 3)}%, "
            f"FN rate {_number(report.get('fn_rate_pct'), 3)}%")
    at_fp = report.get("fn_at_fp_pct") or {}
    if at_fp:
        line += "; FN rate at " + ", ".join(f"{target}% FP {_number(value, 3)}%" for target, value in at_fp.items())
    return line


def format_report(report: Mapping[str, Any], true_sets: Sequence[frozenset],
                  predicted_sets: Sequence[frozenset], max_labels: int = MAX_MATRIX_LABELS) -> str:
    """The whole text report: what was evaluated, the headline measures, per class, the confusion matrix."""
    config = report["config"]
    if report["mode"] == "split":
        what = (f"split: learned {report['train_docs']:,} documents, scored {report['test_docs']:,} "
                f"({report.get('split', 'standard')} split)")
    else:
        what = (f"prequential: {report['docs']:,} documents scored before their label was learned "
                f"(order {report['order']}, delay {report['delay']}, {report['unscored']} unscored)")
    lines = [f"{config['model']} on {report.get('data', 'the data')}, {what}"]
    lines.append("  ".join(f"{name} {_number(report.get(key))}" for key, name in HEADLINE))
    if report.get("fp_rate_pct") is not None or report.get("fn_rate_pct") is not None:
        lines.append(_decisions(report))
    lines.append(f"speed: learn {_number(report.get('learn_docs_per_s'), 0)} docs/s, "
                 f"score {_number(report.get('score_docs_per_s'), 0)} docs/s")
    rows = per_class(true_sets, predicted_sets)
    if rows:
        width = max(len(str(row["label"])) for row in rows[:max(max_labels, 1) * 4])
        width = max(width, len("label"))
        lines += ["", f"{'label':<{width}}  precision  recall      F1    support  output"]
        shown = rows if len(rows) <= max_labels * 4 else rows[: max_labels * 4]
        for row in shown:
            lines.append(f"{str(row['label']):<{width}}  {_number(row['precision']):>9}  {_number(row['recall']):>6}  "
                         f"{_number(row['f1']):>6}  {row['support']:>9,}  {row['predicted']:>6,}")
        if len(shown) < len(rows):
            lines.append(f"... {len(rows) - len(shown):,} more labels (--json has every one)")
    matrix = confusion(true_sets, predicted_sets, powerset=report.get("multilabel") == "powerset")
    if matrix is not None:
        if len(matrix[0]) <= max_labels:
            lines += ["", "confusion matrix (rows: true label, columns: output)", format_matrix(*matrix)]
        else:
            lines += ["", f"confusion matrix: {len(matrix[0]):,} classes, more than {max_labels} to print "
                      f"(--json keeps it up to {MAX_JSON_LABELS})"]
    return "\n".join(lines)
