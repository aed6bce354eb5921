#pragma once

#include <string>
#include <vector>

#include "data/data_spec.h"
#include "data/example.h"

namespace bert::data {

/// Text / text-pair examples from GLUE TSV (format glue, or auto when the directory is a GLUE
/// task) or generic TSV/CSV/JSONL with spec.columns (defaults: text_a = text|sentence|sentence1,
/// text_b = text_b|sentence2, label = label|labels (a JSONL list: its JSON text), id = id|idx;
/// role labels "a,b,c": 0/1 columns, the label the JSON list of those set). A file without a
/// label column gives unlabelled examples (GLUE test files). Throws DataError (file:line) /
/// ConfigError.
std::vector<TextExample> read_text_examples(const DataSpec& spec);

/// Multiple-choice examples from SWAG CSV (sent1 = context; each choice = sent2 + " " +
/// ending<i>, as HF's run_swag builds them; label = index) or generic TSV/CSV/JSONL (roles
/// context, prefix, endings "a,b,c", label, id; endings default to every column ending<N>).
std::vector<ChoiceExample> read_choice_examples(const DataSpec& spec);

/// SQuAD v1.1 / v2.0 JSON. Every answer's character offset is checked against its context
/// (DataError "file: data[i].paragraphs[j].qas[k]: ..." when outside it; a text mismatch is
/// logged and counted, the example is kept). `version` receives the file's "version".
std::vector<QaExample> read_squad(const DataSpec& spec, std::string* version = nullptr);

/// CoNLL column files: whitespace-separated columns, "-DOCSTART-" lines start documents, blank
/// lines end sentences. Token column spec.columns["token"] (default 0), tag column ["tag"]
/// (default the last; a file with one column is untagged). All lines must have the same number
/// of columns (DataError file:line otherwise).
std::vector<TaggedSentence> read_conll(const DataSpec& spec);

/// Tagged sentences for token classification: CoNLL columns (read_conll; format conll or tsv,
/// or auto), or JSON lines (format jsonl, or auto for .jsonl / .json, as HF's run_ner.py takes
/// them): one sentence per line, its words under "tokens" (or "words"), its tags under
/// "ner_tags" (or "tags"; names, or integers as their decimal text, as run_ner.py's label
/// list), spec.columns {token, tag} naming other fields, optional "id"; "pos_tags" and
/// "chunk_tags" (HF's CoNLL-2003 export) are ignored, another field is a DataError, as is a
/// line whose tags do not match its words one to one. The lines form one document (as CoNLL
/// without -DOCSTART-). ConfigError for another format.
std::vector<TaggedSentence> read_tagged(const DataSpec& spec);

/// The format `spec` will be read as: spec.format unless kAuto, then by content and name
/// (GLUE directory -> glue; .json -> squad; .csv with ending0 -> swag; ...), falling back to
/// `task_default`.
DataFormat resolve_format(const DataSpec& spec, DataFormat task_default);

}  // namespace bert::data
