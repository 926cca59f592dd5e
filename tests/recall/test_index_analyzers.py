"""The index's word fields are analysed by tantivy's built-in `en_stem`, the queries by the
`words` analyzer of `memcli.recall.index.analyzers`: the two must make the same terms, and the
same number of them (BM25 reads the field's length), or a query would miss what it should find."""

from __future__ import annotations

import tantivy as tv

from memcli.recall import index as rindex

TEXTS = [
    "Deploys to staging run on Fridays; the deployment's rollback is `make rollback`.",
    "getUserName HTTPServer snake_case_name src/worker/queue_runner.py v2.3.1 user-service",
    "Café naïve résumé Ünïcödé straße ÆØÅ déjà-vu coöperate",
    "数据库 迁移 日本語のテキスト 한국어 emoji 🚀🔥 mixed中文words",
    "a" * 39 + " " + "b" * 40 + " " + "é" * 20 + " " + "é" * 19 + "x " + "c" * 41,
    "running runs ran runner happily happiness generously generalization organizational",
    "it's don't O'Reilly co-operate e-mail 3.14159 1,000,000 2026-11-23T04:40:00Z",
    "tabs\tand\nnewlines\r\nand\u00a0non-breaking\u2003spaces and\u200bzero width",
    "UPPER lower MiXeD ΣΊΣΥΦΟΣ Ολα İstanbul ǅemal ﬁle ﬂow",
    "x1 2x a_b _lead trail_ __dunder__ 0x1F $HOME %PATH% user@example.com #channel",
]


def _index() -> tuple[tv.Index, tv.Schema]:
    builder = tv.SchemaBuilder()
    builder.add_text_field("builtin", stored=False, tokenizer_name=rindex.WORDS, index_option="freq")
    builder.add_text_field("ours", stored=False, tokenizer_name="ours", index_option="freq")
    schema = builder.build()
    index = tv.Index(schema)
    index.register_tokenizer("ours", rindex.analyzers()[0])
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for text in TEXTS:
        writer.add_document(tv.Document(builtin=text, ours=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index, schema


def test_builtin_en_stem_and_the_query_analyzer_make_the_same_terms_and_lengths() -> None:
    index, schema = _index()
    words = rindex.analyzers()[0]
    searcher = index.searcher()
    for n, text in enumerate(TEXTS):
        terms = words.analyze(text)
        assert terms, text
        for term in set(terms):
            builtin = searcher.search(tv.Query.term_query(schema, "builtin", term), 20).hits
            ours = searcher.search(tv.Query.term_query(schema, "ours", term), 20).hits
            # Same documents, and the same BM25 score: same term frequency and field length.
            assert [a for _, a in builtin] == [a for _, a in ours], (n, term)
            assert [round(s, 5) for s, _ in builtin] == [round(s, 5) for s, _ in ours], (n, term)
            assert any(address.doc == n for _, address in builtin), (n, term)
