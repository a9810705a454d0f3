//! Claude Code's mixed state file, `~/.claude.json`: which of its keys are Claude's own
//! bookkeeping and which are instructions, for the floor's key-by-key merge.

use ahp_wrap_adapter::{KeyRule, Treatment};

/// How each key of `~/.claude.json` is treated on the floor: its MCP servers (user and
/// project scope), the tools and servers a project is granted, the trust of a workspace
/// other than this run's, and anything that names a command are instructions; the rest
/// (onboarding, tips, counters, the theme, the API key approval, this workspace's trust
/// answer, caches) is Claude's own bookkeeping.
pub(super) fn claude_json_rules() -> Vec<KeyRule> {
    use Treatment::{Guarded, Own};
    [
        ("mcpServers", Guarded),
        ("projects.{workspace}.hasTrustDialogAccepted", Own),
        ("projects.*.hasTrustDialogAccepted", Guarded),
        ("projects.*.mcpServers", Guarded),
        ("projects.*.allowedTools", Guarded),
        ("projects.*.enabledMcpjsonServers", Guarded),
        ("projects.*.disabledMcpjsonServers", Guarded),
        ("projects.*.enableAllProjectMcpServers", Guarded),
        ("projects.*.mcpContextUris", Guarded),
        ("projects.*.hasClaudeMdExternalIncludesApproved", Guarded),
        ("bypassPermissionsModeAccepted", Guarded),
        // Settings keys that name a command or grant, should Claude ever read them here.
        ("allowedTools", Guarded),
        ("hooks", Guarded),
        ("env", Guarded),
        ("permissions", Guarded),
        ("apiKeyHelper", Guarded),
        ("awsAuthRefresh", Guarded),
        ("awsCredentialExport", Guarded),
        ("otelHeadersHelper", Guarded),
        ("statusLine", Guarded),
    ]
    .into_iter()
    .map(|(key, t)| KeyRule::new(key, t))
    .collect()
}
