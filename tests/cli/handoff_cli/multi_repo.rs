//! Handoff CLI: a workspace folder holding several git repositories is captured
//! repository by repository (issue 29), on real repositories with commits and dirty files.

use super::budget::kickoff_text;
use super::*;

fn branch(dir: &Path) -> String {
    git(dir, &["branch", "--show-current"])
}

#[test]
fn a_folder_of_repositories_is_captured_repository_by_repository() {
    let env = Env::new();
    let work = env.path().join("work");
    let api = git_init(&work.join("api"));
    let api_head = commit(&api, "src/lib.rs", "fn a() {}\n", "api: first");
    fs::write(api.join("src/lib.rs"), "fn a() { todo!() }\n").expect("write");
    fs::write(api.join("scratch.txt"), "notes\n").expect("write");
    let web = git_init(&work.join("web"));
    let web_head = commit(&web, "index.html", "<p>hi</p>\n", "web: first");
    fs::write(web.join("app.js"), "let x = 1;\n").expect("write");
    git(&web, &["add", "app.js"]);
    let core = git_init(&work.join("libs/core"));
    commit(&core, "core.c", "int x;\n", "core: first");
    // Four directories down: beyond the documented depth of 3.
    let deep = git_init(&work.join("a/b/c/deep"));
    commit(&deep, "d.txt", "d\n", "deep");
    fs::create_dir_all(work.join("notes")).expect("mkdir");
    fs::write(work.join("notes/todo.md"), "- x\n").expect("write");
    ok(baton_in(&env, &work, &["init"]), "init");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("brief");

    let saved = json_in(
        &env,
        &work,
        &["handoff", "--to", "codex", "--brief", &s(&brief)],
    );
    let id = saved["bundle"].as_str().expect("bundle").to_string();
    let cat_in = |path: &str| {
        ok(
            baton_in(&env, &work, &["cat", &format!("{id}:{path}")]),
            path,
        )
    };
    let ev: Value = serde_json::from_str(&cat_in("evidence/evidence.json")).expect("evidence");
    assert!(ev["git"].is_null(), "{ev}");
    let partial: Vec<&str> = ev["partial"]
        .as_array()
        .expect("partial")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        partial,
        [
            "api: no upstream",
            "libs/core: no upstream",
            "web: no upstream"
        ],
        "{ev}"
    );
    let repos = ev["repositories"].as_object().expect("repositories");
    let names: Vec<&str> = repos.keys().map(String::as_str).collect();
    assert_eq!(names, ["api", "libs/core", "web"], "{ev}");
    let api_ev = &repos["api"]["git"];
    assert_eq!(api_ev["head"], api_head.as_str());
    assert_eq!(api_ev["root"], canonical(&api));
    assert_eq!(
        api_ev["unstaged"],
        json!([{ "path": "src/lib.rs", "status": "modified" }])
    );
    assert_eq!(api_ev["untracked"][0]["path"], "scratch.txt");
    assert_eq!(repos["web"]["git"]["head"], web_head.as_str());
    assert_eq!(
        repos["web"]["git"]["staged"],
        json!([{ "path": "app.js", "status": "added" }])
    );
    assert_eq!(repos["libs/core"]["git"]["staged"], json!([]));

    // Each repository's patches under its path; the page says what was captured.
    assert!(cat_in("evidence/repos/api/unstaged.patch").contains("+fn a() { todo!() }"));
    assert!(cat_in("evidence/repos/web/staged.patch").contains("+let x = 1;"));
    let context = cat_in("context.md");
    for needle in [
        "3 repositories below it were captured (at most 16, at most 3 directories down)",
        "## Repository `api`",
        "- uncommitted: 1 unstaged, 1 untracked",
        "## Repository `libs/core`",
    ] {
        assert!(context.contains(needle), "{needle:?}:\n{context}");
    }

    // The kickoff: one compact line per repository, compared with the live one.
    let text = kickoff_text(&json_in(&env, &work, &["resume"]));
    let short = |h: &str| h[..12].to_string();
    for needle in [
        "- workspace folder of 3 repositories".to_string(),
        format!(
            "- api: {} at {}, 1 unstaged, 1 untracked; live HEAD same, changes present\n",
            branch(&api),
            short(&api_head)
        ),
        format!(
            "- web: {} at {}, 1 staged; live HEAD same, changes present\n",
            branch(&web),
            short(&web_head)
        ),
    ] {
        assert!(text.contains(&needle), "{needle:?}:\n{text}");
    }
    assert!(!text.contains("not a git repository"), "{text}");

    // Inside one of them, the single-repository shape is unchanged.
    let saved = json_in(
        &env,
        &api,
        &["handoff", "--to", "codex", "--brief", &s(&brief)],
    );
    let id = saved["bundle"].as_str().expect("bundle").to_string();
    let one: Value = serde_json::from_str(&ok(
        baton_in(
            &env,
            &api,
            &["cat", &format!("{id}:evidence/evidence.json")],
        ),
        "cat",
    ))
    .expect("evidence");
    assert_eq!(one["git"]["head"], api_head.as_str(), "{one}");
    assert!(one.get("repositories").is_none(), "{one}");
}

#[test]
fn a_folder_without_repositories_is_still_not_a_git_repository() {
    let env = Env::new();
    let work = env.write_tree("plain", &[("a/b.txt", b"x\n")]);
    ok(baton_in(&env, &work, &["init"]), "init");
    let saved = json_in(&env, &work, &["save", "--no-brief"]);
    let id = saved["bundle"].as_str().expect("bundle").to_string();
    let ev: Value = serde_json::from_str(&ok(
        baton_in(
            &env,
            &work,
            &["cat", &format!("{id}:evidence/evidence.json")],
        ),
        "cat",
    ))
    .expect("evidence");
    assert_eq!(ev["partial"], json!(["not a git repository"]), "{ev}");
    assert!(ev.get("repositories").is_none(), "{ev}");
}
