use super::*;

#[test]
fn a_bad_value_names_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.toml");
    std::fs::write(&path, "[agent]\nlifecycle = \"forever\"\n").unwrap();
    let err = Config::from_file(&path, dir.path()).unwrap_err().to_string();
    assert!(err.contains("h.toml") && err.contains("`agent.lifecycle`") && err.contains("forever"), "{err}");
    std::fs::write(&path, "[agent]\nmodle = \"echo\"\n").unwrap();
    let err = Config::from_file(&path, dir.path()).unwrap_err().to_string();
    assert!(err.contains("h.toml") && err.contains("agent.modle") && err.contains("unknown field"), "{err}");
}

/// Issue 15: a run limit past Temporal's own cap (or zero), and an empty answer window,
/// stop the harness from being built, naming the key.
#[test]
fn run_limits_past_temporal_s_caps_and_an_empty_answer_window_are_refused_naming_the_key() {
    let mut c = Config::with_data_dir("/tmp/x");
    assert_eq!(c.agent.run_limits().unwrap(), harness_workflow::RunLimits::default());
    c.agent.run_max_events = 60_000;
    let err = c.agent.run_limits().unwrap_err().to_string();
    assert!(err.contains("`agent.run_max_events` = 60000") && err.contains("51200"), "{err}");
    c.agent.run_max_events = 100;
    c.agent.run_max_messages = 0;
    let err = crate::Harness::new(c.clone()).err().expect("refused").to_string();
    assert!(err.contains("`agent.run_max_messages` = 0"), "{err}");
    c.agent.run_max_messages = 10;
    c.agent.answer_window = 0;
    let err = c.agent.run_limits().unwrap_err().to_string();
    assert!(err.contains("`agent.answer_window`"), "{err}");
}

#[test]
fn the_public_url_is_base_url_plus_prefix_and_a_disagreeing_path_names_both() {
    let mut c = Config::with_data_dir("/tmp/x");
    assert_eq!(c.public_url().unwrap(), "http://127.0.0.1:8080");
    c.server.prefix = "agents/helper/".into();
    assert_eq!(c.prefix(), "/agents/helper");
    c.server.base_url = Some("https://a.example.com".into());
    assert_eq!(c.public_url().unwrap(), "https://a.example.com/agents/helper");
    c.server.base_url = Some("https://a.example.com/agents/helper/".into());
    assert_eq!(c.public_url().unwrap(), "https://a.example.com/agents/helper");
    c.server.base_url = Some("https://a.example.com/other".into());
    let err = c.public_url().unwrap_err().to_string();
    assert!(err.contains("/other") && err.contains("/agents/helper") && err.contains("server.prefix"), "{err}");
}

#[test]
fn grpc_compression_is_off_on_loopback_and_gzip_elsewhere_unless_configured() {
    let mut t = TemporalSection::default();
    for local in ["http://127.0.0.1:7233", "http://localhost:7233", "http://[::1]:7233", "http://127.0.0.2:7233"] {
        assert_eq!(t.compression(local), GrpcCompression::None, "{local}");
    }
    for remote in ["https://ns.tmprl.cloud:7233", "http://10.0.0.5:7233", "http://temporal:7233"] {
        assert_eq!(t.compression(remote), GrpcCompression::Gzip, "{remote}");
    }
    t.grpc_compression = Some(GrpcCompression::Gzip);
    assert_eq!(t.compression("http://127.0.0.1:7233"), GrpcCompression::Gzip);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[temporal]\ngrpc_compression = \"none\"\n").unwrap();
    let c = Config::from_file(&file, dir.path()).unwrap();
    assert_eq!(c.temporal.compression("https://ns.tmprl.cloud:7233"), GrpcCompression::None);
    std::fs::write(&file, "[temporal]\ngrpc_compression = \"zstd\"\n").unwrap();
    let err = Config::from_file(&file, dir.path()).unwrap_err().to_string();
    assert!(err.contains("grpc_compression") && err.contains("c.toml"), "{err}");
}

#[test]
fn defaults_put_the_store_in_the_data_dir() {
    let c = Config::with_data_dir("/tmp/x");
    assert_eq!(c.store_url(), "sqlite:///tmp/x/harness.db");
    assert_eq!(c.agent.model, "echo");
    assert_eq!(c.temporal.mode, TemporalMode::Embedded);
}

/// Issue 17: `[models.<name>]` of kind `openai`: what is refused names the key, the key comes
/// from the named variable only, and it joins the redaction set by itself.
#[test]
fn openai_models_are_checked_naming_the_key_and_their_keys_are_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.toml");
    let load = |text: &str| {
        std::fs::write(&path, text).unwrap();
        Config::from_file(&path, dir.path())
    };
    let err = load("[models.gpt]\nmodel = \"x\"\n").unwrap_err().to_string();
    assert!(err.contains("`models.gpt` needs `kind`"), "{err}");
    // A kind no factory builds is refused when the harness is built (a host may add kinds).
    let unknown = load("[agent]\nmodel = \"gpt\"\n[models.gpt]\nkind = \"bedrock\"\nmodel = \"x\"\n").unwrap();
    let err = crate::Harness::new(unknown).err().expect("refused").to_string();
    assert!(
        err.contains(
            "`models.gpt.kind` = \"bedrock\" is not a kind this harness has (expected one of \"anthropic\", \"openai\")"
        ),
        "{err}"
    );
    let err = load("[models.echo]\nkind = \"openai\"\nmodel = \"x\"\n").unwrap_err().to_string();
    assert!(err.contains("`models.echo` is a built-in model's name"), "{err}");
    let err = load("[models.gpt]\nkind = \"openai\"\nmodel = \"x\"\ntemprature = 1\n").unwrap_err().to_string();
    assert!(err.contains("models.gpt") && err.contains("unknown field `temprature`"), "{err}");

    let var = "TINY_HARNESS_TEST_KEY_17";
    let config = load(&format!(
        "[agent]\nmodel = \"gpt\"\n[models.gpt]\nkind = \"openai\"\nmodel = \"m\"\napi_key_env = \"{var}\"\n"
    ))
    .unwrap();
    // SAFETY: a variable of this test alone.
    unsafe { std::env::remove_var(var) };
    let err = crate::Harness::new(config.clone()).err().expect("refused").to_string();
    assert!(err.contains("`models.gpt`: the API key variable `TINY_HARNESS_TEST_KEY_17` is not set"), "{err}");
    unsafe { std::env::set_var(var, "sk-unit-test-key") };
    assert!(config.secret_values().contains(&"sk-unit-test-key".to_string()), "the key is redacted");
    let section = |c: &Config| OpenAiSection::from_table("gpt", &c.models.named["gpt"]).unwrap();
    let settings = section(&config).settings("gpt", Some("Be kind.")).unwrap();
    assert_eq!(settings.api_key.as_deref(), Some("sk-unit-test-key"));
    assert_eq!((settings.base_url.as_str(), settings.max_attempts), ("https://api.openai.com/v1", 4));
    unsafe { std::env::remove_var(var) };

    let mut bad = section(&config);
    bad.keyless = true;
    bad.temperature = Some(3.0);
    let err = bad.settings("gpt", None).unwrap_err().to_string();
    assert!(err.contains("`models.gpt.temperature` = 3 must be between 0 and 2"), "{err}");
    bad.temperature = None;
    bad.base_url = "ftp://example.com".into();
    let err = bad.settings("gpt", None).unwrap_err().to_string();
    assert!(err.contains("`models.gpt.base_url`") && err.contains("http or https"), "{err}");
}

/// Issue 29: `[models.<name>]` of kind `anthropic` is built by its factory beside `openai`:
/// its key joins the redaction set, and what is refused names the key.
#[test]
fn anthropic_models_are_checked_naming_the_key_and_their_keys_are_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.toml");
    let load = |text: &str| {
        std::fs::write(&path, text).unwrap();
        Config::from_file(&path, dir.path())
    };
    let err = load("[models.claude]\nkind = \"anthropic\"\nmodel = \"x\"\nmax_tokens = 5\n").unwrap_err().to_string();
    assert!(err.contains("models.claude") && err.contains("unknown field `max_tokens`"), "{err}");
    let var = "TINY_HARNESS_TEST_KEY_29";
    let config = load(&format!(
        "[agent]\nmodel = \"claude\"\n[models.claude]\nkind = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"{var}\"\n"
    ))
    .unwrap();
    // SAFETY: a variable of this test alone.
    unsafe { std::env::remove_var(var) };
    let err = crate::Harness::new(config.clone()).err().expect("refused").to_string();
    assert!(err.contains("`models.claude`: the API key variable `TINY_HARNESS_TEST_KEY_29` is not set"), "{err}");
    unsafe { std::env::set_var(var, "sk-ant-unit-key") };
    assert!(config.secret_values().contains(&"sk-ant-unit-key".to_string()), "the key is redacted");
    assert!(crate::Harness::new(config.clone()).is_ok(), "built by the anthropic factory");
    let section =
        harness_agent::models::AnthropicSection::from_table("claude", &config.models.named["claude"]).unwrap();
    let settings = section.settings("claude", None).unwrap();
    assert_eq!(
        (settings.base_url.as_str(), settings.version.as_str(), settings.max_output_tokens),
        ("https://api.anthropic.com", "2023-06-01", 4096)
    );
    unsafe { std::env::remove_var(var) };
    let mut bad = section;
    bad.keyless = true;
    bad.temperature = Some(1.5);
    let err = bad.settings("claude", None).unwrap_err();
    assert!(err.contains("`models.claude.temperature` = 1.5 must be between 0 and 1"), "{err}");
    bad.temperature = None;
    bad.max_output_tokens = 0;
    assert!(bad.settings("claude", None).unwrap_err().contains("`models.claude.max_output_tokens` must be at least 1"));
}

/// Issue 19: `[[agents]]` entries are checked when the harness is built, each refusal naming
/// the key and the agent; the credentials the headers read are redacted like any secret.
#[test]
fn remote_agents_are_checked_naming_the_key_and_their_credentials_are_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.toml");
    let agent = |body: &str| format!("[[agents]]\n{body}\n");
    let build = |text: String| {
        std::fs::write(&path, text).unwrap();
        let c = Config::from_file(&path, dir.path())?;
        crate::Harness::new(c.clone()).map(|_| c)
    };
    let cases = [
        (agent("id = \"Peer\"\nurl = \"http://x/card\""), "`agents.id` = `Peer`"),
        (agent("id = \"peer\"\nurl = \"ftp://x/card\""), "`agents.url` of agent `peer` must be http or https"),
        (agent("id = \"peer\"\nurl = \"not a url\""), "`agents.url` of agent `peer`"),
        (
            agent("id = \"peer\"\nurl = \"http://x/card\"\nheaders_env = { Authorization = \"TH_TEST_UNSET_VAR\" }"),
            "`agents.headers_env.Authorization` of agent `peer` names the environment variable TH_TEST_UNSET_VAR",
        ),
        (
            format!(
                "{}{}",
                agent("id = \"peer\"\nurl = \"http://x/card\""),
                agent("id = \"peer\"\nurl = \"http://y/card\"")
            ),
            "agent `peer` is configured twice",
        ),
        (agent("id = \"peer\"\nurl = \"http://x/card\"\ntoken = \"x\""), "unknown field `token`"),
    ];
    for (text, says) in cases {
        let err = build(text.clone()).err().unwrap_or_else(|| panic!("refused: {text}")).to_string();
        assert!(err.contains(says), "{text}\n{err}");
    }
    // SAFETY: a variable only this test reads.
    unsafe { std::env::set_var("TH_TEST_PEER_AUTH", "Bearer peer-secret-123") };
    let c =
        build(agent("id = \"peer\"\nurl = \"http://x/card\"\nheaders_env = { Authorization = \"TH_TEST_PEER_AUTH\" }"))
            .unwrap();
    assert!(c.secret_values().contains(&"Bearer peer-secret-123".to_string()));
}

/// Issue 20: TLS to a remote Temporal and its API key are read at build, each mistake named;
/// an API key turns TLS on, joins the redaction set and never shows in Debug.
#[test]
fn temporal_tls_and_api_key_settings_are_checked_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("c.pem");
    std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\n").unwrap();
    let mut c = Config::with_data_dir(dir.path());
    c.temporal.mode = TemporalMode::Remote;
    c.temporal.tls_cert_file = Some(pem.clone());
    let err = crate::Harness::new(c.clone()).err().unwrap().to_string();
    assert!(err.contains("`temporal.tls_cert_file` and `temporal.tls_key_file` go together"), "{err}");
    c.temporal.tls_cert_file = None;
    c.temporal.tls_ca_file = Some(dir.path().join("missing.pem"));
    let err = c.temporal.auth().unwrap_err().to_string();
    assert!(err.contains("`temporal.tls_ca_file`") && err.contains("missing.pem"), "{err}");
    c.temporal.tls_ca_file = None;
    c.temporal.api_key_env = Some("TH_TEST_TEMPORAL_KEY_UNSET".into());
    let err = c.temporal.auth().unwrap_err().to_string();
    assert!(err.contains("`temporal.api_key_env`") && err.contains("TH_TEST_TEMPORAL_KEY_UNSET"), "{err}");
    // SAFETY: a variable only this test reads.
    unsafe { std::env::set_var("TH_TEST_TEMPORAL_KEY", "tk-secret-987") };
    c.temporal.api_key_env = Some("TH_TEST_TEMPORAL_KEY".into());
    let auth = c.temporal.auth().unwrap();
    assert!(auth.tls && auth.api_key.as_deref() == Some("tk-secret-987"));
    assert!(!format!("{auth:?}").contains("tk-secret-987"));
    assert!(c.secret_values().contains(&"tk-secret-987".to_string()));
    assert!(!Config::with_data_dir(dir.path()).temporal.auth().unwrap().tls, "plain by default");
}
