"""Analysis of one Run: where and why the n samples diverge, how sure the model was, when tokens
arrived, what the n samples say together (diversity, answers, agreement), and how many of them a
prompt needs (curves against k, a stopping rule, the uncertainty of the set); and of several runs:
side by side, as a sweep, as one HTML report. Pure functions over the run record: pandas tables and
plotly figures, no vLLM and no Gradio, so a saved bundle can be analysed anywhere.

A *measure* is a number about a run (``run_measures``, ``SetMeasures``; a ``Measures`` callable
adds some to a sweep, a comparison or a report); a *figure* is a plotly object (the ``*_figure``
functions). This module is the package's front door: callers import from here."""

from playground.analysis.answers import (
    DEFAULT_EXTRACTOR,
    EXTRACTORS,
    AnswerGroup,
    Answers,
    Extractor,
    InvalidExtractor,
    entropy_bits,
    group_answers,
    parse_extractor,
)
from playground.analysis.comparison import (
    comparison_html,
    measures_side_by_side,
    pair_frame,
    run_row,
    seed_overlap_sentence,
    seed_overlaps,
    settings_diff,
)
from playground.analysis.confidence import (
    CONFIDENCE_COLUMNS,
    LOGPROB_NOTE,
    Confidence,
    SequenceLogprob,
    confidence_of,
    confidence_table,
    degmat,
    eigv,
    jaccard_matrix,
    sequence_logprob,
    word_set,
)
from playground.analysis.convergence import (
    DRAWS,
    EXACT_UP_TO,
    Convergence,
    Curve,
    HowMany,
    Settled,
    agreement_at_k,
    convergence_figure,
    convergence_of,
    how_many_headline,
    how_many_samples,
    maj_at_k,
    pass_at_k,
    read_reference,
    settle_probability,
    settled_at,
    settled_sentence,
)
from playground.analysis.diff import (
    DIFF_COLORS,
    common_prefix,
    diff_html,
    diff_rows,
    diff_samples,
    first_divergence,
    identical_groups,
    pairwise_frame,
    pairwise_heatmap,
    similarity,
)
from playground.analysis.display import PARTIAL, message_figure, pieces, truncate, visible
from playground.analysis.diversity import (
    Diversity,
    SetDiversity,
    distinct_n,
    diversity_of,
    ngram_kernel,
    pairwise_similarities,
    set_diversity,
    similarity_matrix,
    vendi_score,
)
from playground.analysis.meaning import (
    DEFAULT_SIMILARITY,
    MeaningClusters,
    cluster_by_similarity,
    cosine_matrix,
    meaning_clusters,
)
from playground.analysis.report import (
    comparison_report,
    report_for,
    run_report,
    runs_report,
    sweep_report,
)
from playground.analysis.reproduce import condition_changes, other_requests, why_different
from playground.analysis.sample_set import (
    GROUP_COLUMNS,
    SAMPLE_COLUMNS,
    SET_COLUMNS,
    SetMeasures,
    answer_groups_figure,
    groups_frame,
    measures_table,
    samples_frame,
    set_measures,
)
from playground.analysis.sweep_views import (
    GridCell,
    Measures,
    all_measures,
    grid_html,
    run_measures,
    set_measures_hook,
    sweep_chart,
    sweep_grid,
    sweep_info,
    sweep_order,
    sweep_table,
    with_answers,
)
from playground.analysis.timing import (
    child_timeline_figure,
    engine_load_line,
    event_outputs_frame,
    events_figure,
    itl_figure,
    itl_frame,
    phases_frame,
    timing_frame,
    tokens_over_time_figure,
    ttft_figure,
)
from playground.analysis.tree import Branch, divergence_tree, tree_figure, tree_frame
from playground.analysis.uncertainty import (
    agreement_figure,
    agreement_frame,
    entropy_lower_bound,
    uncertainty_figure,
    uncertainty_frame,
)

__all__ = [
    "CONFIDENCE_COLUMNS", "DEFAULT_EXTRACTOR", "DEFAULT_SIMILARITY", "DIFF_COLORS", "DRAWS", "EXACT_UP_TO",
    "EXTRACTORS", "GROUP_COLUMNS", "LOGPROB_NOTE", "PARTIAL", "SAMPLE_COLUMNS", "SET_COLUMNS", "AnswerGroup", "Answers",
    "Branch", "Confidence", "Convergence", "Curve", "Diversity", "Extractor", "GridCell", "HowMany", "InvalidExtractor",
    "MeaningClusters", "Measures", "SequenceLogprob", "SetDiversity", "SetMeasures", "Settled", "agreement_at_k",
    "agreement_figure", "agreement_frame", "all_measures", "answer_groups_figure", "child_timeline_figure",
    "cluster_by_similarity", "common_prefix", "comparison_html", "comparison_report", "condition_changes",
    "confidence_of", "confidence_table", "convergence_figure", "convergence_of", "cosine_matrix", "degmat", "diff_html",
    "diff_rows", "diff_samples", "distinct_n", "divergence_tree", "diversity_of", "eigv", "engine_load_line",
    "entropy_bits", "entropy_lower_bound", "event_outputs_frame", "events_figure", "first_divergence", "grid_html",
    "group_answers", "groups_frame", "how_many_headline", "how_many_samples", "identical_groups", "itl_figure",
    "itl_frame", "jaccard_matrix", "maj_at_k", "meaning_clusters", "measures_side_by_side", "measures_table",
    "message_figure", "ngram_kernel", "other_requests", "pair_frame", "pairwise_frame", "pairwise_heatmap",
    "pairwise_similarities", "parse_extractor", "pass_at_k", "phases_frame", "pieces", "read_reference", "report_for",
    "run_measures", "run_report", "run_row", "runs_report", "samples_frame", "seed_overlap_sentence", "seed_overlaps",
    "sequence_logprob", "set_diversity", "set_measures", "set_measures_hook", "settings_diff", "settle_probability",
    "settled_at", "settled_sentence", "similarity", "similarity_matrix", "sweep_chart", "sweep_grid", "sweep_info",
    "sweep_order", "sweep_report", "sweep_table", "timing_frame", "tokens_over_time_figure", "tree_figure",
    "tree_frame", "truncate", "ttft_figure", "uncertainty_figure", "uncertainty_frame", "vendi_score", "visible",
    "why_different", "with_answers", "word_set",
]
