//! Fuzzes the briefing (`handoff.md`) normalizer and validator and the transcript
//! (`transcript.jsonl`) validator and paged search.
#![no_main]

use baton::handoff::briefing::Briefing;
use baton::handoff::transcript::{MAX_EVENTS, MAX_TOKENS, search, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(raw) = std::str::from_utf8(data)
        && let Ok(briefing) = Briefing::parse(raw)
    {
        // Normalizing is idempotent: the stored text parses to the same briefing.
        assert_eq!(
            Briefing::parse(&briefing.text).ok().as_ref(),
            Some(&briefing)
        );
        assert!(briefing.text.ends_with('\n') && !briefing.text.ends_with("\n\n"));
        assert!(briefing.summary_line().chars().count() <= 120);
        assert!(!briefing.summary_line().contains('\n'));
    }

    // The first line is the query, the rest the transcript.
    let (query, jsonl) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (
            String::from_utf8_lossy(&data[..i]).into_owned(),
            &data[i + 1..],
        ),
        None => (String::new(), data),
    };
    let valid = validate(jsonl);
    let mut cursor: Option<String> = None;
    let mut seen = 0;
    let mut last_line = 0;
    for page_no in 0.. {
        let page = search(jsonl, &query, cursor.as_deref());
        assert_eq!(page.is_ok(), valid.is_ok(), "validate and search disagree");
        let Ok(page) = page else { break };
        assert!(page.hits.len() <= MAX_EVENTS);
        assert!(page.hits.iter().map(|h| h.tokens).sum::<usize>() <= MAX_TOKENS);
        assert!(page.total_matches <= *valid.as_ref().expect("valid"));
        for hit in &page.hits {
            assert!(hit.line > last_line, "pages overlap or go backwards");
            last_line = hit.line;
        }
        seen += page.hits.len();
        if page.next_cursor.is_some() {
            assert!(!page.hits.is_empty(), "an empty page with more to come");
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            assert_eq!(seen, page.total_matches, "paging lost or repeated matches");
            break;
        }
        assert!(page_no < 10_000);
    }
    let _ = search(jsonl, &query, Some(&query));
});
