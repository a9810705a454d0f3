//! The walk over the parsed script: lists, pipelines, compound commands, simple commands and
//! their words, with the shell state each one sees.

use brush_parser::ast;

use super::{is_unknown, literal_output, Command, Ctx, ShellError, Stdin, Walker};

impl Walker<'_> {
    pub(super) fn list(
        &mut self,
        list: &ast::CompoundList,
        ctx: &mut Ctx,
    ) -> Result<(), ShellError> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, ctx)?;
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, ctx)?;
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, ctx: &mut Ctx) -> Result<(), ShellError> {
        if let [only] = pipeline.seq.as_slice() {
            // A lone command runs in this shell: its `cd` and assignments carry over.
            return self.command(only, ctx);
        }
        let mut upstream = Vec::new();
        let mut feed = ctx.stdin.clone();
        let mut listed = None;
        for cmd in &pipeline.seq {
            let mut stage = ctx.clone();
            stage.fed_by.extend(upstream.iter().cloned());
            stage.stdin = feed;
            stage.listed = listed;
            let start = self.out.len();
            let programs = self.nested(|w| w.command(cmd, &mut stage))?;
            listed = super::only_command(&self.out[start..]).and_then(super::listing);
            feed = literal_output(&self.out[start..]).map_or(Stdin::Data, Stdin::Literal);
            upstream.extend(programs);
        }
        Ok(())
    }

    pub(super) fn command(&mut self, cmd: &ast::Command, ctx: &mut Ctx) -> Result<(), ShellError> {
        match cmd {
            ast::Command::Simple(simple) => self.simple(simple, ctx),
            ast::Command::Compound(compound, redirects) => {
                let mut inner = ctx.clone();
                let stdin = self.redirect_only(redirects.as_ref(), ctx)?;
                if let Some(s) = stdin {
                    inner.stdin = s;
                }
                self.compound(compound, &mut inner)?;
                if !matches!(compound, ast::CompoundCommand::Subshell(_)) {
                    *ctx = Ctx {
                        stdin: ctx.stdin.clone(),
                        fed_by: ctx.fed_by.clone(),
                        ..inner
                    };
                }
                Ok(())
            }
            ast::Command::Function(def) => {
                let ast::FunctionBody(body, redirects) = &def.body;
                let mut inner = ctx.clone();
                self.compound(body, &mut inner)?;
                self.redirect_only(redirects.as_ref(), ctx).map(|_| ())
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test_expr(&test.expr, ctx)?;
                self.redirect_only(redirects.as_ref(), ctx).map(|_| ())
            }
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, ctx: &Ctx) -> Result<(), ShellError> {
        use ast::ExtendedTestExpr as T;
        match e {
            T::And(a, b) | T::Or(a, b) => {
                self.test_expr(a, ctx)?;
                self.test_expr(b, ctx)
            }
            T::Not(a) | T::Parenthesized(a) => self.test_expr(a, ctx),
            T::UnaryTest(_, w) => self.expand(&w.value, ctx).map(|_| ()),
            T::BinaryTest(_, a, b) => {
                self.expand(&a.value, ctx)?;
                self.expand(&b.value, ctx).map(|_| ())
            }
        }
    }

    pub(super) fn compound(
        &mut self,
        cmd: &ast::CompoundCommand,
        ctx: &mut Ctx,
    ) -> Result<(), ShellError> {
        use ast::CompoundCommand as C;
        match cmd {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value, ctx).map(|_| ()),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&e.value, ctx)?;
                }
                self.list(&f.body.list, ctx)
            }
            C::BraceGroup(g) => self.list(&g.list, ctx),
            C::Subshell(s) => self.list(&s.list, &mut ctx.clone()),
            C::ForClause(f) => self.for_clause(f, ctx),
            C::CaseClause(c) => {
                self.expand(&c.value.value, ctx)?;
                for item in &c.cases {
                    for p in &item.patterns {
                        self.expand(&p.value, ctx)?;
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body, ctx)?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                self.list(&i.condition, ctx)?;
                self.list(&i.then, ctx)?;
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.list(cond, ctx)?;
                    }
                    self.list(&e.body, ctx)?;
                }
                Ok(())
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0, ctx)?;
                self.list(&w.1.list, ctx)
            }
            C::Coprocess(c) => self.command(&c.body, &mut ctx.clone()),
        }
    }

    /// `for V in WORDS`: the body once per value when every value is known (up to a few),
    /// else once with `V` unknown.
    fn for_clause(&mut self, f: &ast::ForClauseCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        const MAX_UNROLL: usize = 16;
        let mut values = Vec::new();
        let mut fed = Vec::new();
        for w in f.values.iter().flatten() {
            let e = self.expand(&w.value, ctx)?;
            fed.extend(e.fed);
            values.extend(e.fields);
        }
        // The loop variable is set by the shell: an edit of the environment, like `export`.
        let mut marker = self.new_command(ctx);
        marker.env.push(f.variable_name.clone());
        marker.fed_by.extend(fed);
        self.push(marker)?;
        if f.values.is_none() || values.iter().any(|v| is_unknown(v)) || values.len() > MAX_UNROLL {
            ctx.vars.insert(f.variable_name.clone(), None);
            return self.list(&f.body.list, ctx);
        }
        for v in values {
            ctx.vars.insert(f.variable_name.clone(), Some(v));
            self.list(&f.body.list, ctx)?;
        }
        Ok(())
    }

    /// Records the redirections of a compound command (`{ …; } > file`) as a command of its
    /// own, and returns what they make the compound's stdin.
    fn redirect_only(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        ctx: &Ctx,
    ) -> Result<Option<Stdin>, ShellError> {
        let Some(redirects) = redirects else {
            return Ok(None);
        };
        let mut cmd = self.new_command(ctx);
        let mut stdin = None;
        for r in &redirects.0 {
            self.redirect(r, ctx, &mut cmd, &mut stdin)?;
        }
        self.push(cmd)?;
        Ok(stdin)
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, ctx: &mut Ctx) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut cmd = self.new_command(ctx);
        let mut argv: Vec<String> = Vec::new();
        let mut stdin: Option<Stdin> = None;
        let mut assignments: Vec<(String, Option<String>)> = Vec::new();
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
        for item in prefix {
            match item {
                Item::AssignmentWord(a, w) => {
                    let (ast::AssignmentName::VariableName(n)
                    | ast::AssignmentName::ArrayElementName(n, _)) = &a.name;
                    cmd.env.push(n.clone());
                    let value = match &a.value {
                        ast::AssignmentValue::Scalar(v) => {
                            let e = self.expand_one(&v.value, ctx)?;
                            cmd.fed_by.extend(e.fed.iter().cloned());
                            cmd.env.extend(e.assigned.iter().cloned());
                            let made = (!a.append)
                                .then(|| {
                                    super::mktemp::stand_in(
                                        &v.value,
                                        ctx,
                                        &assignments,
                                        &self.resolver.home,
                                        self.made.len(),
                                    )
                                })
                                .flatten();
                            match made {
                                Some(path) => {
                                    self.made.push(path.clone());
                                    Some(path)
                                }
                                None => Some(e.text()).filter(|t| !is_unknown(t) && !a.append),
                            }
                        }
                        ast::AssignmentValue::Array(items) => {
                            for (k, v) in items {
                                if let Some(k) = k {
                                    self.expand(&k.value, ctx)?;
                                }
                                let e = self.expand(&v.value, ctx)?;
                                cmd.fed_by.extend(e.fed);
                            }
                            None
                        }
                    };
                    // The whole word, too: brush keeps `A=$(cmd)` in `w`.
                    let _ = w;
                    assignments.push((n.clone(), value));
                }
                other => self.item(other, ctx, &mut cmd, &mut argv, &mut stdin)?,
            }
        }
        if let Some(name) = &simple.word_or_name {
            let e = self.expand(&name.value, ctx)?;
            cmd.fed_by.extend(e.fed);
            cmd.vars.extend(e.vars);
            cmd.env.extend(e.assigned);
            argv.extend(e.fields);
        }
        for item in suffix {
            self.item(item, ctx, &mut cmd, &mut argv, &mut stdin)?;
        }
        if let Some(s) = stdin {
            cmd.stdin = s;
        }
        if argv.is_empty() {
            // `A=1` alone sets a shell variable for what follows.
            for (name, value) in assignments {
                ctx.vars.insert(name, value);
            }
        } else {
            cmd.assigns = assignments;
        }
        self.argv(cmd, argv, ctx)
    }

    /// One word, redirection or process substitution of a simple command.
    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        ctx: &Ctx,
        cmd: &mut Command,
        argv: &mut Vec<String>,
        stdin: &mut Option<Stdin>,
    ) -> Result<(), ShellError> {
        use ast::CommandPrefixOrSuffixItem as Item;
        match item {
            // After the command name, `a=b` is an ordinary argument (`export A=b`).
            Item::Word(w) | Item::AssignmentWord(_, w) => {
                let e = self.expand(&w.value, ctx)?;
                cmd.fed_by.extend(e.fed);
                cmd.vars.extend(e.vars);
                cmd.env.extend(e.assigned);
                // `local d=$(mktemp -d)`: the same stand-in as a plain assignment's.
                let made = match item {
                    Item::AssignmentWord(a, _) => match &a.value {
                        ast::AssignmentValue::Scalar(v) if !a.append => super::mktemp::stand_in(
                            &v.value,
                            ctx,
                            &[],
                            &self.resolver.home,
                            self.made.len(),
                        )
                        .map(|path| (a, path)),
                        _ => None,
                    },
                    _ => None,
                };
                match made {
                    Some((a, path)) => {
                        let (ast::AssignmentName::VariableName(n)
                        | ast::AssignmentName::ArrayElementName(n, _)) = &a.name;
                        argv.push(format!("{n}={path}"));
                        self.made.push(path);
                    }
                    None => argv.extend(e.fields),
                }
            }
            Item::IoRedirect(r) => self.redirect(r, ctx, cmd, stdin)?,
            Item::ProcessSubstitution(kind, sub) => {
                let start = self.out.len();
                let programs = self.nested(|w| w.list(&sub.list, &mut ctx.clone()))?;
                if matches!(kind, ast::ProcessSubstitutionKind::Read) {
                    // `source <(kubectl completion bash)`: a known generator's set-up code.
                    let held = if super::only_command(&self.out[start..])
                        .is_some_and(super::shell_setup)
                    {
                        Stdin::Literal(String::new())
                    } else {
                        literal_output(&self.out[start..]).map_or(Stdin::Data, Stdin::Literal)
                    };
                    cmd.procsubs.push((argv.len(), held));
                    cmd.fed_by.extend(programs);
                }
                argv.push("/dev/fd/63".to_owned());
            }
        }
        Ok(())
    }
}
