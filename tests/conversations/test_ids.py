import time
import uuid

from conversations.ids import uuid7, uuid7_ints
from tests.support import add_turn


def test_ids_are_version_7_with_the_creation_time():
    before = time.time_ns() // 1_000_000
    made = uuid7()
    after = time.time_ns() // 1_000_000
    assert made.version == 7 and made.variant == uuid.RFC_4122
    assert before <= made.int >> 80 <= after


def test_ids_sort_by_creation_time_and_never_repeat():
    first = uuid7_ints(1000)
    time.sleep(0.002)
    later = uuid7_ints(1000)
    assert max(first) < min(later)
    assert len(set(first + later)) == 2000
    for value in first + later:
        assert uuid.UUID(int=value).version == 7


def test_new_rows_get_time_ordered_ids(db):
    from conversations import store
    from streams.builder import EventRecord

    conversation = store.create_conversation(title="t")
    turn = add_turn(conversation, "user")
    events = store.append_events(turn, [EventRecord("message", text="a")])
    time.sleep(0.002)
    later = store.append_events(turn, [EventRecord("message", text="b")])
    for row in (conversation, turn, *events, *later):
        assert row.pk.version == 7
    assert events[0].pk < later[0].pk
    assert [e.pk for e in turn.events.order_by("seq")] == [events[0].pk, later[0].pk]
