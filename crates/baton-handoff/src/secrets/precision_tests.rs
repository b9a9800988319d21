//! Precision of the generic rules and binary content (issue 29): every example of the
//! issue is not a secret, the literals beside them still are.

use super::*;

/// Each line holds no secret: nothing is found and the text is kept byte for byte.
#[test]
fn code_references_types_tags_and_prose_are_not_secrets() {
    for text in [
        "const apiKey = process.env.API_KEY;\n",
        "let password = getPasswordFromVault();\n",
        "token = Phoenix.Token.sign(socket, \"user socket\", user.id)\n",
        "SECRET_KEY = os.environ[\"SECRET_KEY\"]\n",
        "password = os.getenv(\"DB_PASSWORD\")\n",
        "db:\n  password: ${DB_PASSWORD}\n",
        "password: ${DB_PASSWORD}/replica\n",
        "password: {{ .Values.db.password }}\n",
        "api_key: ${{ secrets.API_KEY }}\n",
        "type Login struct {\n\tPassword string `password:\"password\"`\n\tToken string `json:\"token\" token:\"bearer\"`\n}\n",
        "<credentials accesskey=\"n\" />\n",
        "pwd: Jim Meyering\n",
        "let token = list(&mut input)?;\n",
        "let token = next_token();\nSession { password: password.into() }\n",
        "secret = self.client_secret\n",
        "{\"password\": \"Enter your password\", \"token\": \"Token expired.\"}\n",
        "dsn = f\"postgres://{user}:{password}@{host}/db\"\n",
        "url = \"https://user:password@example.com/\"\n",
        "#define PEM_RSA_HEADER \"-----BEGIN RSA PRIVATE KEY-----\"\n",
        "_SK_START = b\"-----BEGIN OPENSSH PRIVATE KEY-----\\n\"\nrest = data\n",
    ] {
        let r = redact(text.as_bytes());
        assert!(r.counts.is_empty(), "{text:?}: {:?}", r.counts);
        assert_eq!(r.bytes, text.as_bytes());
    }
}

/// Literals assigned to secret-named keys are still secrets, in every form the issue
/// names.
#[test]
fn literal_values_are_still_secrets() {
    for (text, secret) in [
        ("password = \"hunter2xyz\"\n", "hunter2xyz"),
        (
            "API_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc\n",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        ),
        ("SECRET_KEY=4f9a1c2e7b3d8a6f\n", "4f9a1c2e7b3d8a6f"),
        (
            "const apiKey = \"Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB\";\n",
            "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB",
        ),
        ("Server=db;Uid=sa;Pwd=Sup3r;\n", "Sup3r"),
        ("password: s3cr3t-pa55\n", "s3cr3t-pa55"),
        (
            "{\"client_secret\": \"6da89121079f83b2\"}\n",
            "6da89121079f83b2",
        ),
        (
            "url = \"https://admin:Tr0ub4dor@example.com/\"\n",
            "Tr0ub4dor",
        ),
        ("password: ${USER}-s3cr3t!\n", "s3cr3t!"),
    ] {
        let r = redact(text.as_bytes());
        let out = String::from_utf8_lossy(&r.bytes);
        assert!(
            !r.counts.is_empty() && !out.contains(secret),
            "{text:?} -> {out:?}"
        );
    }
    // A key block with a body is a key, and one cut right after its BEGIN line too.
    for key in [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n",
        "{\"k\":\"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN\\n-----END PRIVATE KEY-----\\n\"}",
        "the output ends with -----BEGIN EC PRIVATE KEY-----",
    ] {
        assert_eq!(
            scan(key.as_bytes()).get("private_key_block"),
            Some(&1),
            "{key:?}"
        );
    }
}

/// A seeded buffer of random bytes (xorshift: the same bytes on every run) with the
/// anchors of the generic rules in it, as random data holds them by chance.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn binary_content_skips_the_generic_rules_but_not_the_tokens() {
    let mut blob = random_bytes(1 << 16, 29);
    // What a `pwd` anchor in random bytes looks like to the assignment rule, and a URL
    // with a password: both found in text, neither in binary content.
    let planted = b" pwd=Xk3$9qZ!vR2 and ftp://u:Q9x7Lm2p@h ";
    blob[30_000..30_000 + planted.len()].copy_from_slice(planted);
    assert_eq!(Content::of(&blob), Content::Binary);
    let as_text = scan_as(&blob, Content::Text);
    assert!(as_text.contains_key("password_assignment"), "{as_text:?}");
    assert!(as_text.contains_key("url_credentials"), "{as_text:?}");
    assert_eq!(scan(&blob), BTreeMap::new());
    // A token with a fixed prefix is found in binary content all the same.
    let token = b" ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 ";
    blob[40_000..40_000 + token.len()].copy_from_slice(token);
    assert_eq!(
        scan(&blob).into_keys().collect::<Vec<_>>(),
        ["github_token"]
    );
    // A NUL only after the first 8000 bytes: text, as git decides.
    let mut late = vec![b'a'; BINARY_SNIFF];
    late.extend_from_slice(b"\0 password = \"hunter2xyz\"\n");
    assert_eq!(Content::of(&late), Content::Text);
    assert!(scan(&late).contains_key("password_assignment"));
}

#[test]
fn a_stream_is_binary_or_text_by_its_start() {
    // A chunk after the first holds no NUL in its own first 8000 bytes, yet the file is
    // binary: decided from the start of the file.
    let mut data = random_bytes(2 * STREAM_CHUNK, 7);
    let planted = b" pwd=Xk3$9qZ!vR2 ";
    let at = STREAM_CHUNK + 100;
    for b in &mut data[STREAM_CHUNK - stream::OVERLAP..at + 9000] {
        if *b == 0 {
            *b = b'x';
        }
    }
    data[at..at + planted.len()].copy_from_slice(planted);
    assert!(scan_reader(&mut &data[..]).unwrap().is_empty());
    let token = b" ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 ";
    data[at + 50..at + 50 + token.len()].copy_from_slice(token);
    let kinds: Vec<_> = scan_reader(&mut &data[..]).unwrap().into_iter().collect();
    assert_eq!(kinds, ["github_token"]);
}
