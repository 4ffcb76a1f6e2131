use super::*;

fn table(max_keys: usize) -> KeyTable {
    let window = KeyWindow {
        window: Duration::from_secs(60),
        max_keys,
    };
    KeyTable::new("t", window, &Arc::new(MemoryBudget::new(1 << 30)), None)
}

const DURABLE: AckMode = AckMode::Durable;

#[test]
fn an_accepted_key_answers_its_resend_as_a_duplicate() {
    let keys = table(10);
    let now = Instant::now();
    assert!(matches!(keys.begin("k", 1, DURABLE, now), Begin::New(_)));
    keys.settle("k", Ok((3, Held::Durable)), now);
    assert!(matches!(
        keys.begin("k", 1, DURABLE, now),
        Begin::Duplicate { rows: 3 }
    ));
    assert!(matches!(
        keys.begin("k", 1, AckMode::Async, now),
        Begin::Duplicate { rows: 3 }
    ));
    assert_eq!(
        keys.status("k", now),
        KeyStatus::Accepted {
            rows: 3,
            held: Held::Durable
        }
    );
    assert!(matches!(keys.begin("k", 2, DURABLE, now), Begin::Conflict));
}

#[test]
fn a_resend_waits_for_the_first_then_follows_its_outcome() {
    let keys = table(10);
    let now = Instant::now();
    assert!(matches!(keys.begin("k", 1, DURABLE, now), Begin::New(_)));
    let Begin::Wait(mut changed) = keys.begin("k", 1, DURABLE, now) else {
        panic!("the first is in flight");
    };
    assert_eq!(keys.status("k", now), KeyStatus::InFlight);
    keys.settle("k", Err("overloaded".to_owned()), now);
    assert!(changed.has_changed().unwrap(), "the waiter is told");
    changed.mark_unchanged();
    assert_eq!(
        keys.status("k", now),
        KeyStatus::Refused("overloaded".to_owned())
    );
    assert!(
        matches!(keys.begin("k", 2, DURABLE, now), Begin::New(_)),
        "a refused key is free, even for other rows"
    );
}

#[test]
fn a_resend_asking_for_more_than_its_first_holds_waits_for_it_to_land() {
    let keys = table(10);
    let now = Instant::now();
    assert!(matches!(
        keys.begin("k", 1, AckMode::Async, now),
        Begin::New(_)
    ));
    keys.settle("k", Ok((2, Held::Buffered)), now);
    let Begin::Wait(changed) = keys.begin("k", 1, DURABLE, now) else {
        panic!("buffered rows do not answer a durable resend");
    };
    let Begin::Wait(_) = keys.begin("k", 1, AckMode::Committed, now) else {
        panic!("nor a committed one");
    };
    let flush: Arc<str> = Arc::from("t/p/1-4");
    keys.landed(["k"], Some(&flush));
    assert!(changed.has_changed().unwrap());
    assert!(matches!(
        keys.begin("k", 1, AckMode::Committed, now),
        Begin::Duplicate { rows: 2 }
    ));
    assert_eq!(
        keys.status("k", now),
        KeyStatus::Accepted {
            rows: 2,
            held: Held::Committed { flush: Some(flush) }
        }
    );
}

#[test]
fn rows_that_land_before_their_insert_is_answered_are_committed_when_it_is() {
    let keys = table(10);
    let now = Instant::now();
    assert!(matches!(
        keys.begin("k", 1, AckMode::Committed, now),
        Begin::New(_)
    ));
    let flush: Arc<str> = Arc::from("t/p/5-5");
    keys.landed(["k"], Some(&flush));
    keys.settle("k", Ok((1, Held::Committed { flush: None })), now);
    assert_eq!(
        keys.status("k", now),
        KeyStatus::Accepted {
            rows: 1,
            held: Held::Committed { flush: Some(flush) }
        }
    );
}

#[test]
fn a_key_whose_rows_the_store_refused_is_free_again() {
    let keys = table(10);
    let now = Instant::now();
    assert!(matches!(
        keys.begin("k", 1, AckMode::Async, now),
        Begin::New(_)
    ));
    keys.settle("k", Ok((1, Held::Buffered)), now);
    keys.store_refused("k", "bad value");
    assert_eq!(
        keys.status("k", now),
        KeyStatus::Refused("bad value".to_owned())
    );
    assert!(matches!(keys.begin("k", 1, DURABLE, now), Begin::New(_)));
}

#[test]
fn recovered_keys_answer_resends_and_do_not_overwrite_known_ones() {
    let keys = table(10);
    let now = Instant::now();
    keys.recovered("logged", 1, 4, Held::Durable, now);
    keys.recovered("landed", 2, 5, Held::Committed { flush: None }, now);
    assert!(matches!(
        keys.begin("logged", 1, DURABLE, now),
        Begin::Duplicate { rows: 4 }
    ));
    assert!(matches!(
        keys.begin("logged", 1, AckMode::Committed, now),
        Begin::Wait(_)
    ));
    assert!(matches!(
        keys.begin("landed", 2, AckMode::Committed, now),
        Begin::Duplicate { rows: 5 }
    ));
    keys.recovered("landed", 2, 5, Held::Durable, now);
    assert_eq!(
        keys.status("landed", now),
        KeyStatus::Accepted {
            rows: 5,
            held: Held::Committed { flush: None }
        }
    );
}

#[test]
fn the_journal_brings_landed_keys_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Arc::new(MemoryBudget::new(1 << 30));
    let window = KeyWindow::default();
    let keys = KeyTable::new("t", window, &budget, Some(dir.path().into()));
    let landed = KeyedInsert::new(Arc::from("k"), 9, 2, 1);
    keys.journal()
        .unwrap()
        .append("t/p/1-1", &[landed], SystemTime::now())
        .unwrap();
    drop(keys);
    let keys = KeyTable::new("t", window, &budget, Some(dir.path().into()));
    let now = crate::clock::now();
    assert!(matches!(
        keys.begin("k", 9, AckMode::Committed, now),
        Begin::Duplicate { rows: 2 }
    ));
    assert!(matches!(keys.begin("k", 8, DURABLE, now), Begin::Conflict));
    assert_eq!(
        keys.status("k", now),
        KeyStatus::Accepted {
            rows: 2,
            held: Held::Committed {
                flush: Some(Arc::from("t/p/1-1"))
            }
        }
    );
}

#[test]
fn the_hash_is_of_the_values_and_stays_the_same_across_versions() {
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let batch = |ids: Vec<i64>, names: Vec<Option<&str>>| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap()
    };
    let a = batch(vec![1, 2], vec![Some("x"), None]);
    assert_eq!(
        rows_hash(&a),
        rows_hash(&batch(vec![1, 2], vec![Some("x"), None]))
    );
    assert_ne!(
        rows_hash(&a),
        rows_hash(&batch(vec![1, 2], vec![Some("x"), Some("")]))
    );
    assert_ne!(
        rows_hash(&a),
        rows_hash(&batch(vec![1, 3], vec![Some("x"), None]))
    );
    // Kept in log records and journals: a change here would make every resend after an
    // upgrade a conflict.
    assert_eq!(rows_hash(&a), PINNED_HASH, "{:#x}", rows_hash(&a));
}

/// The hash of the rows of `the_hash_is_of_the_values_and_stays_the_same_across_versions`.
const PINNED_HASH: u64 = 0xc1c8_6a99_01f3_2f59;

#[test]
fn keys_are_forgotten_past_the_window_or_the_count_but_not_in_flight() {
    let keys = table(2);
    let start = Instant::now();
    for key in ["a", "b", "c"] {
        assert!(matches!(keys.begin(key, 1, DURABLE, start), Begin::New(_)));
        keys.settle(key, Ok((1, Held::Buffered)), start);
    }
    assert_eq!(keys.status("a", start), KeyStatus::Unknown);
    assert_eq!(keys.held(), (2, 2 * (1 + KEY_OVERHEAD)));
    assert_eq!(keys.lock().reservation.bytes(), RESERVATION_STEP);
    assert!(matches!(keys.begin("d", 1, DURABLE, start), Begin::New(_)));
    let later = start + Duration::from_secs(61);
    assert_eq!(keys.status("c", later), KeyStatus::Unknown);
    assert_eq!(keys.status("d", later), KeyStatus::InFlight);
    keys.settle("d", Ok((1, Held::Buffered)), later);
    assert_eq!(keys.held().0, 1, "d is kept until it settles");
    let much_later = later + Duration::from_secs(61);
    assert_eq!(keys.status("d", much_later), KeyStatus::Unknown);
    assert_eq!(keys.held(), (0, 0), "then it ages out from when it settled");
    assert_eq!(
        keys.lock().reservation.bytes(),
        0,
        "and gives its memory back"
    );
    assert!(check_key("").is_err());
    assert!(check_key(&"x".repeat(257)).is_err());
    assert!(check_key("a\nb").is_err());
    assert!(check_key("batch-2026-12-06/17").is_ok());
}
