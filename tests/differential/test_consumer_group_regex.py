"""Regular expression subscriptions of KIP-848 consumer groups against Apache Kafka and kcoord:
what each heartbeat answers, in order, while an expression is resolved off the heartbeat path
(Kafka's background executor, kcoord's refresh timer) and again after a matching topic is created.

How many heartbeats it takes depends on when the resolution lands, so the comparison keeps the
answers that carry an assignment (a full request's, or a changed one's) and the epochs they carry:
the first heartbeat's empty assignment, the topic assigned after the refresh, the new topic after
the next refresh, on both."""

from __future__ import annotations

import pytest

from tests.differential.consumer_ops import Member, assignment_by_name, create_topics, describe, member_id
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import create_topic

pytestmark = pytest.mark.differential


def test_an_expression_is_assigned_after_the_heartbeat_that_brings_it(pair: Pair) -> None:
    group, prefix = unique("kip848-rx-later"), unique("rxl")
    one, two, other = prefix + "-one", prefix + "-two", prefix + "x-other"

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {one: 2, other: 1})
        m = Member(c, group, member_id(group), regex=prefix + r"-.*")
        answers = [assignment_by_name(c, m.heartbeat())]

        def beat() -> dict[str, object]:
            answer = assignment_by_name(c, m.heartbeat())
            assert isinstance(answer, dict)
            answers.append(answer)
            return answer

        retry(beat, lambda a: a["assignment"] == {one: [0, 1]})
        create_topic(c, two, 1)
        retry(beat, lambda a: isinstance(a["assignment"], dict) and two in a["assignment"])
        assigned = [a for a in answers if isinstance(a, dict) and a["assignment"] is not None]
        return {"errors": sorted({a["error_code"] for a in answers if isinstance(a, dict)}),
                "assigned": assigned, "described": describe(c, group)}

    answers = pair.compare(scenario)
    assigned = answers["assigned"]  # type: ignore[index]
    # Nothing at the heartbeat that brought the expression; each topic once resolved.
    assert [a["assignment"] for a in assigned] == [{}, {one: [0, 1]}, {one: [0, 1], two: [0]}]
