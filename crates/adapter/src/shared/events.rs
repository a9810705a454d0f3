//! One declaration of a framework's hook events: the enum, `ALL`, `name`, `parse` and
//! `is_tool_event`, generated from the shim's table so that each shim keeps only its data.

/// Declares a framework's hook events.
///
/// Each line is `Variant = "AgentName"`, with `[tool]` after the events that take a
/// tool-name `matcher` in the agent's settings, each after its doc comments (every variant
/// needs one: the workspace warns `missing_docs`). Lines go in the order the agent fires the
/// events in a simple run: that is the order of `ALL`, hence of registration.
///
/// ```text
/// hook_events! {
///     /// The Foo hook events we register.
///     pub enum FooEvent {
///         /// A session starts.
///         SessionStart = "SessionStart",
///         /// A tool call is about to run.
///         PreToolUse = "PreToolUse" [tool],
///     }
/// }
/// ```
#[macro_export]
macro_rules! hook_events {
    (@tool tool) => { true };
    (@tool) => { false };
    (
        $(#[$meta:meta])*
        $vis:vis enum $Enum:ident {
            $( $(#[$vmeta:meta])* $Variant:ident = $name:literal $([$tool:ident])? ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $Enum {
            $( $(#[$vmeta])* $Variant ),+
        }

        impl $Enum {
            /// Every event we register, in the order the agent fires them in a simple run.
            $vis const ALL: [$Enum; [$($name),+].len()] = [$($Enum::$Variant),+];

            /// The agent's name for the event (its key in the agent's hook settings, and
            /// the hook name on our hook command line).
            $vis fn name(self) -> &'static str {
                match self {
                    $( $Enum::$Variant => $name ),+
                }
            }

            /// Whether the event takes a tool-name `matcher` in the agent's settings.
            $vis fn is_tool_event(self) -> bool {
                match self {
                    $( $Enum::$Variant => $crate::hook_events!(@tool $($tool)?) ),+
                }
            }

            /// The event called `name`, if we register one by that name.
            $vis fn parse(name: &str) -> Option<$Enum> {
                $Enum::ALL.into_iter().find(|e| e.name() == name)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    hook_events! {
        /// Events of a made-up agent.
        pub(super) enum Fake {
            Start = "start",
            BeforeTool = "before-tool" [tool],
            End = "end",
        }
    }

    #[test]
    fn the_table_gives_order_names_tools_and_parsing() {
        assert_eq!(Fake::ALL, [Fake::Start, Fake::BeforeTool, Fake::End]);
        assert_eq!(Fake::BeforeTool.name(), "before-tool");
        assert!(Fake::BeforeTool.is_tool_event());
        assert!(!Fake::Start.is_tool_event() && !Fake::End.is_tool_event());
        for e in Fake::ALL {
            assert_eq!(Fake::parse(e.name()), Some(e));
        }
        assert_eq!(Fake::parse("Start"), None);
    }
}
