"""Every method the tab's menu offers says in one line what it is: the registry holds the description and the run
index's choices serve it (issue #41, item 6)."""

from __future__ import annotations

from repviz import methods, service


def test_every_registered_method_has_a_one_line_description():
    for name, method in methods.METHODS.items():
        assert method.description and "\n" not in method.description, name
    assert methods.METHODS["kpca"].description == "kernel PCA"


def test_the_choices_the_page_reads_carry_the_descriptions():
    served = {m["name"]: m["description"] for m in service.choices()["methods"]}
    assert served == {name: m.description for name, m in methods.METHODS.items()}
