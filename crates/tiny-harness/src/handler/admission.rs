//! SendMessage's way in (S4, S5, S7, S13, S19): each step returns a typed [`Refused`], and
//! one audit write at the boundary ([`HarnessHandler::admit`]) records what was refused.
//! A message that passes is durable in its task's inbox before its delivery starts.

use super::access::{Access, Caller, Role};
use super::controls::{self, PolicyPoint, PolicyRequest};
pub(super) use super::pending::{Accepted, AnswerBy, AnswerRead, Delivered, Pending};
use super::push::SealedPush;
use super::{HarnessHandler, store_error};
use a2a_server::CallContext;
use a2a_types::{A2AError, Message, SendMessageRequest, Task, TaskState, validate};
use harness_store::{InboxOutcome, TaskHead};
use harness_workflow::{InboxItem, ItemKind, Lifecycle, Receipt, TaskInput, terminal_refusal};

/// Why a message was not admitted.
enum Refused {
    /// Refused for what it is or where it goes: the audit row keeps it and the reason.
    Audited { task_id: String, message: Box<Message>, error: A2AError },
    /// Failed with no message to audit, or the store failed.
    Unaudited(A2AError),
}

impl From<A2AError> for Refused {
    fn from(e: A2AError) -> Self {
        Self::Unaudited(e)
    }
}

/// Refuses `message` (audited under its own task id).
fn refused(message: &Message, error: A2AError) -> Refused {
    Refused::Audited { task_id: message.task_id.clone(), message: Box::new(message.clone()), error }
}

/// Where a message goes.
struct Target {
    task_id: String,
    context_id: String,
    /// The stored snapshot read before delivery (a continued task, when asked for).
    before: Option<Task>,
    new_task: bool,
    /// The brief a new task is built from (S21).
    brief: Option<super::brief::Brief>,
}

/// A step either finds the message answered already (a retry) or lets it go on.
enum Step<T> {
    Answered(Box<Pending>),
    Next(T),
}

impl HarnessHandler {
    /// Validates, redacts and audits a message, and starts its delivery to the task's inbox
    /// (S4, S5, S7), for an answer `by`.
    pub(super) async fn admit(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
        by: AnswerBy,
    ) -> Result<Pending, A2AError> {
        let request_id = uuid::Uuid::new_v4().to_string();
        match self.admission(&request_id, ctx, &req, by).await {
            Ok(pending) => {
                crate::hosting::record_task_id(&pending.task_id);
                Ok(pending)
            }
            Err(Refused::Unaudited(error)) => Err(error),
            Err(Refused::Audited { task_id, message, error }) => {
                crate::hosting::record_task_id(&task_id);
                let outcome = InboxOutcome::Refused(error.message.clone());
                if let Err(e) = self.store.record_inbox(&request_id, &task_id, &message, outcome, "").await {
                    tracing::warn!(error = %e, "could not write the audit row of a refused message");
                }
                Err(error)
            }
        }
    }

    async fn admission(
        &self,
        request_id: &str,
        ctx: &CallContext,
        req: &SendMessageRequest,
        by: AnswerBy,
    ) -> Result<Pending, Refused> {
        let caller =
            self.caller(ctx, &[req.message.as_ref().and_then(|m| m.metadata.as_ref()), req.metadata.as_ref()]).await?;
        let mut message = self.checked(req, &caller)?;
        let sent = message.clone();
        let classified = controls::classify(&mut message, &self.commands).map_err(|e| refused(&sent, e))?;
        let kind = classified.kind;
        controls::check_anonymous(&kind, &caller).map_err(|e| refused(&sent, e))?;
        // An inline push config is checked before anything is written, and stored on the task
        // the message goes to once that is known (a retry's is the first attempt's task).
        let push = match req.configuration.as_ref().and_then(|c| c.task_push_notification_config.clone()) {
            Some(config) => Some(self.seal_push_config(config).map_err(|e| refused(&sent, e))?),
            None => None,
        };
        let mut target = if message.task_id.is_empty() {
            self.new_target(&message)
        } else {
            match self.continued(&caller, &message, by == AnswerBy::Accepted).await? {
                Step::Answered(pending) => return self.answered(*pending, push, kind).await,
                Step::Next(target) => target,
            }
        };
        if let Some(fields) = classified.brief {
            target.brief = Some(self.brief(fields, &caller).map_err(|e| refused(&sent, e))?);
        }
        message.task_id = target.task_id.clone();
        message.context_id = target.context_id.clone();
        stamp_sender(&mut message, &caller);
        self.ask_policy(&caller, &message, &kind, target.new_task).await.map_err(|e| refused(&message, e))?;
        // S5: the message is durable before anything is acknowledged.
        let target = match self.record(request_id, &caller, &mut message, target).await? {
            Step::Answered(pending) => return self.answered(*pending, push, kind).await,
            Step::Next(target) => target,
        };
        if let Some(push) = push
            && let Err(error) = self.put_push_config(&target.task_id, push, true).await
        {
            let outcome = InboxOutcome::Refused(error.message.clone());
            self.store.set_inbox_outcome(request_id, outcome).await.map_err(store_error)?;
            return Err(Refused::Unaudited(error));
        }
        // A blocking SendMessage's answer is read as its outcome is written (issue 31).
        let read = (by == AnswerBy::End).then(|| {
            let history = req.configuration.as_ref().and_then(|c| c.history_length);
            AnswerRead { history_length: self.answer_history(history), artifacts: self.answer_artifacts() }
        });
        Ok(self.start_delivery(request_id, &caller, message, target, kind, read))
    }

    /// A retry answered with its first outcome; its inline push config, if any, goes to the
    /// task the first attempt went to.
    async fn answered(&self, pending: Pending, push: Option<SealedPush>, kind: ItemKind) -> Result<Pending, Refused> {
        if let Some(push) = push {
            self.put_push_config(&pending.task_id, push, true).await?;
        }
        Ok(pending.of_kind(kind))
    }

    /// The host's policy, when it gave one (S9): `request.received` for an ordinary
    /// message, `command.invoked` for a command or a control.
    async fn ask_policy(
        &self,
        caller: &Caller,
        message: &Message,
        kind: &ItemKind,
        new_task: bool,
    ) -> Result<(), A2AError> {
        let Some(policy) = &self.policy else { return Ok(()) };
        let (point, command, args) = match kind {
            ItemKind::Message | ItemKind::BriefOnly | ItemKind::TaskUpdate { .. } | ItemKind::Record { .. } => {
                (PolicyPoint::RequestReceived, None, String::new())
            }
            ItemKind::Control => (PolicyPoint::CommandInvoked, Some("control".to_string()), String::new()),
            ItemKind::Command { name, args } => (PolicyPoint::CommandInvoked, Some(name.clone()), args.clone()),
        };
        let request = PolicyRequest {
            point,
            task_id: (!new_task).then(|| message.task_id.clone()),
            sender: caller.id().map(String::from),
            message: message.clone(),
            command,
            args,
            tool: None,
        };
        controls::ask(policy.as_ref(), request).await
    }

    /// The request's message, validated and redacted, if this agent takes it now: a
    /// resolver must name the sender, Temporal must answer, and it must fit a payload.
    fn checked(&self, req: &SendMessageRequest, caller: &Caller) -> Result<Message, Refused> {
        // Limits before any work (issue 33): a message of ten thousand parts is not redacted,
        // validated or stored part by part; its audit row keeps an excerpt.
        let parts = req.message.as_ref().map_or(0, |m| m.parts.len());
        let most_parts = self.settings.max_message_parts;
        if parts > most_parts {
            let error = A2AError::invalid_params(format!(
                "invalid params: the message has {parts} parts; this agent takes at most {most_parts} parts per \
                 message (`agent.max_message_parts`)"
            ))
            .with("field", "message.parts");
            let mut excerpt = req.message.clone().expect("a message with parts");
            excerpt.parts.truncate(most_parts);
            self.redactor.message(&mut excerpt);
            return Err(refused(&excerpt, error));
        }
        // Redacted before anything is refused: even a refused message's audit row never
        // holds a secret (issue 28).
        let redacted = req.message.clone().map(|mut m| {
            self.redactor.message(&mut m);
            m
        });
        let as_sent = |error: A2AError| match &redacted {
            Some(m) => refused(m, error),
            None => Refused::Unaudited(error),
        };
        if *caller == Caller::Unresolved {
            return Err(as_sent(A2AError::invalid_params(
                "invalid params: no participant: the participant resolver resolved none for this request \
                 (with a resolver, metadata cannot name the sender)",
            )));
        }
        validate::send_message(req).map_err(as_sent)?;
        let message = redacted.expect("a validated request has a message");
        if !self.health.is_up() {
            return Err(refused(&message, self.health.unavailable("the delivery of the message")));
        }
        let size = a2a_types::json_len(&message).unwrap_or(0);
        let most = self.settings.max_message_bytes;
        if size > most {
            let error = A2AError::invalid_params(format!(
                "invalid params: the message is {size} bytes; this agent takes at most {most} bytes per message \
                 (`agent.max_message_bytes`): a larger one does not fit Temporal's payloads"
            ))
            .with("field", "message");
            return Err(refused(&message, error));
        }
        Ok(message)
    }

    /// A new task: a fresh id, the message's context or a fresh one.
    fn new_target(&self, message: &Message) -> Target {
        let context_id =
            if message.context_id.is_empty() { uuid::Uuid::new_v4().to_string() } else { message.context_id.clone() };
        Target { task_id: uuid::Uuid::new_v4().to_string(), context_id, before: None, new_task: true, brief: None }
    }

    /// A message to an existing task: it must run on this queue (S19), the caller must be on
    /// it (S13), it must not have ended (S7) and the context must match. A message it
    /// accepted before (same `messageId`) is answered with its first outcome (S5).
    async fn continued(
        &self,
        caller: &Caller,
        message: &Message,
        want_snapshot: bool,
    ) -> Result<Step<Target>, Refused> {
        let task_id = message.task_id.clone();
        // Without a snapshot to read, the head and an earlier delivery of the messageId are
        // one read; the delivery is looked at only once the checks before it passed.
        let (head, mut before, prior) = if want_snapshot {
            let (head, before) = self.head_with_snapshot(&task_id).await?;
            (head, before, None)
        } else {
            let (head, prior) = self.store.head_and_prior(&task_id, &message.message_id).await.map_err(store_error)?;
            (head, None, Some(prior))
        };
        let head = match head {
            Some(h) if h.task_queue == self.task_queue() => h,
            _ => return Err(refused(message, A2AError::task_not_found(&task_id))),
        };
        self.check_participant(caller, &task_id, Access::Read).await.map_err(|e| refused(message, e))?;
        let prior = match prior {
            Some(prior) => prior,
            None => self.store.prior_message(&task_id, &message.message_id).await.map_err(store_error)?,
        };
        if let Some(prior) = prior
            && prior.accepted()
        {
            if !same_message(&prior, message)? {
                return Err(refused(message, reused_id(&prior, message, true)));
            }
            if before.is_none() {
                before = self.answer_row(&task_id, None).await?.map(|r| r.task);
            }
            let receipt = Receipt {
                accepted: true,
                cursor: prior.cursor.unwrap_or(0),
                state: head.state,
                task: None,
                duplicate: true,
            };
            let mut message = message.clone();
            message.context_id = head.context_id.clone();
            return Ok(Step::Answered(Box::new(Pending::answered(task_id, message, before, false, false, receipt))));
        }
        if head.state.is_terminal() {
            let err = A2AError::unsupported(terminal_refusal(head.state))
                .with("taskId", &task_id)
                .with("state", head.state.as_str());
            return Err(refused(message, err));
        }
        if !message.context_id.is_empty() && message.context_id != head.context_id {
            let err = A2AError::invalid_params(format!(
                "invalid params: message.contextId `{}` does not match the task's context `{}`",
                message.context_id, head.context_id
            ));
            return Err(refused(message, err));
        }
        Ok(Step::Next(Target { task_id, context_id: head.context_id, before, new_task: false, brief: None }))
    }

    /// A task's head and its stored snapshot (one read).
    async fn head_with_snapshot(&self, task_id: &str) -> Result<(Option<TaskHead>, Option<Task>), A2AError> {
        Ok(match self.answer_row(task_id, None).await? {
            Some(row) => {
                let head = TaskHead {
                    state: row.state,
                    context_id: row.task.context_id.clone(),
                    last_seq: row.last_seq,
                    task_queue: row.task_queue.clone(),
                    rewrites: 0,
                    rewrote_from: 0,
                };
                (Some(head), Some(row.task))
            }
            None => (None, None),
        })
    }

    /// Writes the message's audit row (S5). A new task's first message also names the
    /// task's participants (the sender, when known, reports it; this agent is its assignee)
    /// and claims the task it opens: a retry of it finds the task its first attempt opened.
    async fn record(
        &self,
        request_id: &str,
        caller: &Caller,
        message: &mut Message,
        mut target: Target,
    ) -> Result<Step<Target>, Refused> {
        let sender = caller.id().unwrap_or("");
        let received = InboxOutcome::Received;
        if !target.new_task {
            self.store
                .record_inbox(request_id, &target.task_id, message, received, sender)
                .await
                .map_err(store_error)?;
            return Ok(Step::Next(target));
        }
        let participants = match &target.brief {
            Some(brief) => brief.participants.clone(),
            None => {
                let mut p = vec![(self.agent_id().to_string(), Role::Assignee.as_str().to_string())];
                if let Some(id) = caller.id() {
                    p.push((id.to_string(), Role::Reporter.as_str().to_string()));
                }
                p
            }
        };
        // Only an identified sender's first message claims its messageId (issue 28): the id is
        // its creator's, and an anonymous creator cannot be told from another, so an anonymous
        // first message always opens a task of its own.
        let opens = caller.id().map(|id| format!("{id}\n{}", message.message_id));
        let Some(prior) = self
            .store
            .record_new_task_inbox(request_id, &target.task_id, message, &participants, sender, opens.as_deref())
            .await
            .map_err(store_error)?
        else {
            return Ok(Step::Next(target));
        };
        // A retried first message: the task its first attempt opened. A refusal names that
        // task only while the sender is still on it.
        if !same_message(&prior, message)? {
            let on_it = self.store.participant_role(&prior.task_id, sender).await.map_err(store_error)?.is_some();
            let error = reused_id(&prior, message, on_it);
            return Err(Refused::Audited { task_id: prior.task_id.clone(), message: Box::new(message.clone()), error });
        }
        let first: Message = serde_json::from_str(&prior.body).map_err(|e| {
            A2AError::internal(format!("the audited first message of task {} is unreadable: {e}", prior.task_id))
        })?;
        (target.task_id, target.context_id) = (prior.task_id.clone(), first.context_id.clone());
        message.task_id = target.task_id.clone();
        message.context_id = target.context_id.clone();
        stamp_sender(message, caller);
        if prior.accepted() {
            let head = self.store.task_head(&target.task_id).await.map_err(store_error)?;
            let state = head.map_or(TaskState::Submitted, |h| h.state);
            let receipt = Receipt { accepted: true, cursor: 0, state, task: None, duplicate: true };
            let direct = self.replies_directly(message, true);
            return Ok(Step::Answered(Box::new(Pending::answered(
                target.task_id,
                message.clone(),
                None,
                true,
                direct,
                receipt,
            ))));
        }
        // Its first attempt was not answered: deliver it again (the workflow, if it started,
        // knows the message and answers with its receipt).
        self.store.record_inbox(request_id, &target.task_id, message, received, sender).await.map_err(store_error)?;
        Ok(Step::Next(target))
    }

    /// Starts the message's update-with-start in a task of its own; it writes the audit
    /// row's outcome (S5) whatever becomes of the caller. With `read` (a blocking
    /// SendMessage), it reads the log from the receipt and the task's row as it writes the
    /// outcome (one statement on Postgres, issue 31).
    fn start_delivery(
        &self,
        request_id: &str,
        caller: &Caller,
        message: Message,
        target: Target,
        kind: ItemKind,
        read: Option<AnswerRead>,
    ) -> Pending {
        let s = &self.settings;
        let skip_working = s.provider.as_ref().is_some_and(|p| !p.shows_working(&message));
        let direct = kind.is_message() && self.replies_directly(&message, target.new_task);
        let item = InboxItem {
            request_id: request_id.to_string(),
            message: message.clone(),
            skip_working,
            direct,
            kind: kind.clone(),
            sender: caller.id().map(String::from),
            // The request's trace, which the turn's model and tool calls join (issue 32).
            trace: harness_agent::current_traceparent(),
        };
        let brief = target.brief.unwrap_or_default();
        let model = brief.model.clone().unwrap_or_else(|| s.model.clone());
        let instant_model = match &brief.model {
            Some(name) => s.models.get(name).is_some_and(|p| p.is_instant()),
            None => s.instant_model,
        };
        let lifecycle = brief.lifecycle.unwrap_or(s.lifecycle);
        let metadata = if brief.data.is_empty() {
            default_brief(&message, caller.id(), &s.agent_id)
        } else {
            a2a_types::Struct::from_iter([(harness_workflow::task_ext_key(), serde_json::Value::Object(brief.data))])
        };
        let opened_only = kind == ItemKind::BriefOnly && lifecycle == Lifecycle::OneShot && brief.assignee.is_none();
        let input = TaskInput {
            task_id: target.task_id.clone(),
            context_id: target.context_id,
            task_queue: self.task_queue().to_string(),
            lifecycle,
            model,
            linger_secs: s.linger_secs,
            instant_model,
            metadata: target.new_task.then_some(metadata),
            // The first message travels in the start itself, durable with it (docs/event-log.md).
            first: target.new_task.then(|| item.clone()),
            run_limits: s.run_limits,
            assignee: brief.assignee,
            reasoning_effort: brief.reasoning_effort,
            carried: None,
            stand_in: None,
            tools: s.tool_limits.clone(),
        };
        let (temporal, store, request_id) = (self.temporal.clone(), self.store.clone(), request_id.to_string());
        let task_id = target.task_id.clone();
        // Boxed: the delivery's future (the Temporal client's call within) is large, and a
        // spawned future is moved whole into its task and again when it ends (issue 31).
        let delivery = tokio::spawn(Box::pin(async move {
            let outcome = temporal.deliver(&store, input, item).await;
            // Counted where its audit row is settled: once per delivered message, whether
            // or not its sender still waits (a retry answered from its receipt is not).
            crate::metrics::delivered(outcome.as_ref().err());
            let audit = match &outcome {
                Ok(receipt) => InboxOutcome::Accepted(receipt.cursor),
                Err(e) => InboxOutcome::Refused(e.message.clone()),
            };
            match (outcome, read) {
                (Ok(receipt), Some(a)) => store
                    .accepted_then_log_and_task(&request_id, &task_id, receipt.cursor, a.history_length, a.artifacts)
                    .await
                    .map_err(store_error)
                    .map(|read| Delivered { receipt, read: Some(read) }),
                (outcome, _) => {
                    store.set_inbox_outcome(&request_id, audit).await.map_err(store_error)?;
                    outcome.map(|receipt| Delivered { receipt, read: None })
                }
            }
        }));
        Pending {
            task_id: target.task_id,
            message,
            before: target.before,
            new_task: target.new_task,
            direct,
            kind,
            opened_only,
            delivery,
        }
    }

    /// Whether the provider answers `message` with a direct reply: only a message that opens
    /// a task can be, since a client that names a task tracks it.
    fn replies_directly(&self, message: &Message, new_task: bool) -> bool {
        new_task && self.settings.provider.as_ref().is_some_and(|p| p.replies_directly(message))
    }
}

/// Names a known sender on its message, as the channel extension names one
/// (`{"channel_id": <task id>, "sender": <id>}`): a model tells the participants of a
/// conversation apart by it.
fn stamp_sender(message: &mut Message, caller: &Caller) {
    if let Some(sender) = caller.id() {
        let (key, channel) = harness_workflow::channel_mark(&message.task_id, sender);
        message.metadata.get_or_insert_with(Default::default).insert(key, channel);
    }
}

/// The task data of a plain first message (EXTENSIONS.md, task): name = its first line
/// (60 characters at most; `task` when empty), goal = its text, participants = the sender
/// as reporter (when known) and this agent as assignee.
fn default_brief(message: &Message, reporter: Option<&str>, agent_id: &str) -> a2a_types::Struct {
    let text = message.text();
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let name: String = if first.is_empty() { "task".into() } else { first.chars().take(60).collect() };
    let mut participants = Vec::new();
    if let Some(id) = reporter {
        participants.push(serde_json::json!({"id": id, "kind": "human", "role": Role::Reporter.as_str()}));
    }
    participants.push(serde_json::json!({"id": agent_id, "kind": "agent", "role": Role::Assignee.as_str()}));
    let mut metadata = a2a_types::Struct::new();
    metadata.insert(
        harness_workflow::task_ext_key(),
        serde_json::json!({"name": name, "goal": text, "participants": participants}),
    );
    metadata
}

/// Whether a retried `messageId` carries the message it named the first time (S5).
fn same_message(prior: &harness_store::PriorMessage, message: &Message) -> Result<bool, A2AError> {
    let first: Message = serde_json::from_str(&prior.body)
        .map_err(|_| A2AError::internal("an audited message of this messageId is unreadable"))?;
    Ok(first.parts == message.parts && first.role == message.role)
}

/// The refusal of a `messageId` used again for another message, rather than answering it with
/// another's outcome. It names the first message's task only when `name_task` (the caller is
/// on it): no error names a task its caller is not on (issue 28).
fn reused_id(prior: &harness_store::PriorMessage, message: &Message, name_task: bool) -> A2AError {
    let id = &message.message_id;
    if !name_task {
        return A2AError::invalid_params(format!(
            "invalid params: messageId `{id}` was already used for another message; a new message needs a new \
             messageId"
        ))
        .with("field", "message.messageId");
    }
    A2AError::invalid_params(format!(
        "invalid params: messageId `{id}` was already used for another message (task {}); a new message needs a \
         new messageId",
        prior.task_id
    ))
    .with("field", "message.messageId")
    .with("taskId", &prior.task_id)
}
