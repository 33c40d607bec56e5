"""Follow-up questions rewritten into standalone queries (clawkb.answer.followup)."""

from __future__ import annotations

from clawkb.answer.followup import is_follow_up, key_terms, standalone


def test_pronoun_follow_up_gets_the_previous_subject() -> None:
    q = standalone("What is its baud rate?", ["How is the CAN bus wired?"])
    assert q.startswith("What is its baud rate?")
    assert "CAN" in q and "bus" in q and "wired" in q


def test_elliptic_follow_up_swaps_the_subject_of_the_same_shape() -> None:
    assert standalone("what about UART3?", ["What is the baud rate of UART2?"]) == (
        "What is the baud rate of UART3?"
    )
    assert standalone("UART3 呢？", ["UART2 的波特率是多少"]) == "UART3 的波特率是多少"
    assert standalone("那 I2C2 呢", ["I2C1 的上拉电阻"]) == "I2C2 的上拉电阻"


def test_elliptic_without_a_counterpart_appends_the_previous_terms() -> None:
    q = standalone("and the length matching?", ["DDR4 impedance rules"])
    assert q.startswith("the length matching") and "DDR4" in q and "impedance" in q


def test_chinese_pronoun_follow_up() -> None:
    q = standalone("它的阻抗是多少？", ["DDR4 差分走线"])
    assert q.startswith("它的阻抗是多少？") and "DDR4" in q and "差分走线" in q


def test_questions_with_their_own_subject_stay_as_they_are() -> None:
    assert standalone("How is DDR4 length matched?", ["UART2 baud"]) == (
        "How is DDR4 length matched?"
    )
    assert standalone("What is its baud rate?", []) == "What is its baud rate?"
    assert not is_follow_up("DDR4 差分走线阻抗要求")
    assert is_follow_up("why?")


def test_key_terms_drop_question_words() -> None:
    assert key_terms("What is the baud rate of UART2?") == ["baud", "rate", "UART2"]
    assert key_terms("UART2 的波特率是多少") == ["UART2", "波特率"]
