"""Analysis of one Run: where and why the n samples diverge, how sure the model was, when tokens
arrived, and what the n samples say together (diversity, answers, agreement). Pure functions over
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
from playground.analysis.compare import comparison_html, figures_side_by_side, pair_frame, settings_diff
from playground.analysis.diff import (
    DIFF_COLORS,
    common_prefix,
    diff_against,
    diff_html,
    diff_rows,
    diff_samples,
    first_divergence,
    identical_groups,
    pairwise_frame,
    pairwise_heatmap,
    similarity,
)
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
from playground.analysis.events import event_outputs_frame, events_figure
from playground.analysis.meaning import (
    DEFAULT_SIMILARITY,
    MeaningClusters,
    cluster_by_similarity,
    cosine_matrix,
    meaning_clusters,
)
from playground.analysis.phases import child_timeline_figure, engine_load_line, phases_frame
from playground.analysis.report import (
    comparison_report,
    report_for,
    run_report,
    runs_report,
    sweep_report,
    write_html_report,
)
from playground.analysis.reproduce import batch_sizes, condition_changes, other_requests, why_different
from playground.analysis.sample_set import (
    GROUP_COLUMNS,
    SAMPLE_COLUMNS,
    SET_COLUMNS,
    SetFigures,
    answer_groups_figure,
    figures_table,
    groups_frame,
    samples_frame,
    set_figures,
    set_frame,
)
from playground.analysis.summary import summary_frame
from playground.analysis.sweep import (
    Cell,
    Figures,
    all_figures,
    grid_frame,
    grid_html,
    run_figures,
    set_figures_hook,
    sweep_chart,
    sweep_grid,
    sweep_info,
    sweep_order,
    sweep_table,
    with_answers,
)
from playground.analysis.timing import itl_figure, itl_frame, timing_frame, tokens_over_time_figure, ttft_figure
from playground.analysis.tokens import PARTIAL, pieces, visible
from playground.analysis.tree import Branch, divergence_tree, prefix_order, tree_figure, tree_frame
from playground.analysis.uncertainty import (
    agreement_figure,
    agreement_frame,
    entropy_lower_bound,
    uncertainty_figure,
    uncertainty_frame,
)

__all__ = [
    "DIFF_COLORS", "PARTIAL", "Branch",
    "visible", "pieces",
    "first_divergence", "similarity", "common_prefix", "identical_groups", "pairwise_frame", "diff_against",
    "diff_samples", "diff_rows", "diff_html", "pairwise_heatmap",
    "divergence_tree", "prefix_order", "tree_frame", "tree_figure",
    "entropy_lower_bound", "uncertainty_frame", "agreement_frame", "uncertainty_figure", "agreement_figure",
    "itl_frame", "timing_frame", "tokens_over_time_figure", "itl_figure", "ttft_figure",
    "event_outputs_frame", "events_figure",
    "phases_frame", "child_timeline_figure", "engine_load_line",
    "other_requests", "batch_sizes", "condition_changes", "why_different",
    "summary_frame",
    "Diversity", "SetDiversity", "distinct_n", "similarity_matrix", "pairwise_similarities", "ngram_kernel",
    "vendi_score", "diversity_of", "set_diversity",
    "EXTRACTORS", "DEFAULT_EXTRACTOR", "Extractor", "InvalidExtractor", "AnswerGroup", "Answers", "parse_extractor",
    "entropy_bits", "group_answers",
    "DEFAULT_SIMILARITY", "MeaningClusters", "cosine_matrix", "cluster_by_similarity", "meaning_clusters",
    "SET_COLUMNS", "GROUP_COLUMNS", "SAMPLE_COLUMNS", "SetFigures", "set_figures", "set_frame", "samples_frame",
    "figures_table", "groups_frame",
    "answer_groups_figure",
    "Cell", "Figures", "run_figures", "set_figures_hook", "with_answers", "all_figures", "sweep_info", "sweep_order", "sweep_table",
    "sweep_chart",
    "sweep_grid", "grid_frame", "grid_html",
    "pair_frame", "settings_diff", "figures_side_by_side", "comparison_html",
    "run_report", "comparison_report", "sweep_report", "runs_report", "report_for", "write_html_report",
]
