"""TREC files and names: qrels and runs as tensors with id maps, trec_eval / ir_measures measure names.

Example:
    >>> from retrieval_core.trec import parse_measures, qrels_from_dict
    >>> parse_measures(["P_5", "nDCG@10"])
    [('precision@5', 'P_5'), ('ndcg@10', 'ndcg_cut_10')]
    >>> qrels_from_dict({"q": {"d": 2}}).n_relevant(level=2).tolist()
    [1]
"""
from .align import Aligned, DuplicateError, align
from .evaluate import TrecEvaluation, evaluate_trec
from .files import Qrels, Run, Vocabulary, qrels_from_dict, read_qrels, read_run, run_from_dict
from .frames import qrels_from_file, qrels_from_frame, run_from_file, run_from_frame, write_file
from .judge import JudgedBatch, QrelsJudge
from .measures import MeasureError, Unsupported, parse_measures, parse_one, split_measures
from .output import parse_trec_eval_output, read_trec_eval_output
from .write import write_qrels, write_run

__all__ = ["Aligned", "DuplicateError", "MeasureError", "Unsupported", "JudgedBatch", "Qrels", "QrelsJudge", "Run",
           "Vocabulary", "TrecEvaluation", "align", "evaluate_trec", "parse_measures", "parse_one",
           "parse_trec_eval_output", "qrels_from_dict", "read_qrels", "read_run", "read_trec_eval_output",
           "run_from_dict", "split_measures", "write_qrels", "write_run", "qrels_from_frame", "run_from_frame",
           "qrels_from_file", "run_from_file", "write_file"]
