"""Analysis of one Run: where and why the n samples diverge, how sure the model was, when tokens
arrived, what the n samples say together (diversity, answers, agreement), and how many of them a prompt
needs (curves against k, a stopping rule, the uncertainty of the set). Pure functions over
the run record: pandas tables and plotly figures, no vLLM and no Gradio, so a saved bundle can be
analysed anywhere."""

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
    "DIFF_COLORS", "PARTIAL", "Branch",
    "visible", "pieces", "truncate", "message_figure",
    "first_divergence", "similarity", "common_prefix", "identical_groups", "pairwise_frame",
    "diff_samples", "diff_rows", "diff_html", "pairwise_heatmap",
    "divergence_tree", "tree_frame", "tree_figure",
    "entropy_lower_bound", "uncertainty_frame", "agreement_frame", "uncertainty_figure", "agreement_figure",
    "itl_frame", "timing_frame", "tokens_over_time_figure", "itl_figure", "ttft_figure",
    "event_outputs_frame", "events_figure",
    "phases_frame", "child_timeline_figure", "engine_load_line",
    "other_requests", "condition_changes", "why_different",
    "run_row",
    "Diversity", "SetDiversity", "distinct_n", "similarity_matrix", "pairwise_similarities", "ngram_kernel",
    "vendi_score", "diversity_of", "set_diversity",
    "EXTRACTORS", "DEFAULT_EXTRACTOR", "Extractor", "InvalidExtractor", "AnswerGroup", "Answers", "parse_extractor",
    "entropy_bits", "group_answers",
    "DEFAULT_SIMILARITY", "MeaningClusters", "cosine_matrix", "cluster_by_similarity", "meaning_clusters",
    "SET_COLUMNS", "GROUP_COLUMNS", "SAMPLE_COLUMNS", "SetMeasures", "set_measures", "samples_frame",
    "measures_table", "groups_frame",
    "answer_groups_figure",
    "GridCell", "Measures", "run_measures", "set_measures_hook", "with_answers", "all_measures", "sweep_info",
    "sweep_order", "sweep_table",
    "sweep_chart",
    "sweep_grid", "grid_html",
    "pair_frame", "settings_diff", "measures_side_by_side", "comparison_html",
    "run_report", "comparison_report", "sweep_report", "runs_report", "report_for",
    "EXACT_UP_TO", "DRAWS", "Curve", "Settled", "Convergence", "read_reference", "agreement_at_k", "pass_at_k",
    "maj_at_k", "settle_probability", "settled_at", "settled_sentence", "convergence_of", "convergence_figure",
    "LOGPROB_NOTE", "CONFIDENCE_COLUMNS", "Confidence", "SequenceLogprob", "word_set", "jaccard_matrix", "eigv",
    "degmat", "sequence_logprob", "confidence_of", "confidence_table",
    "seed_overlaps", "seed_overlap_sentence",
    "HowMany", "how_many_samples", "how_many_headline",
]
