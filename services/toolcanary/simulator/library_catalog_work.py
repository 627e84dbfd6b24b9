"""Toolsets of the default library for office work: productivity, communication and software operations.

Pure data read by `library_builder`; see `library_schema` for the helpers. Edit here, then rebuild the JSON.
"""

from __future__ import annotations

from toolcanary.simulator.library_schema import Action, Resource, Toolset, a, b, e, i, n, o, s

_ok = o("Outcome.", {"status": e("Outcome of the request.", "accepted", "completed"), "request_id": s("Trace id.")})
_money = o("An amount of money.", {"amount": n("Amount in major units.", 0), "currency": s("ISO 4217 code, e.g. EUR.")},
           ["amount", "currency"])
_address = o("A postal address.", {"street": s("Street and number."), "city": s("City."),
                                   "postal_code": s("Postal code."), "country": s("ISO 3166 alpha-2 country code.")},
             ["street", "city", "country"])

PRODUCTIVITY = [
    Toolset("calendar", "Calendar", "Personal and shared calendars with events, invitations and availability.", [
        Resource("event", "events", "a calendar event with a time range, place and attendees", {
            "title": s("Short title shown in the calendar."),
            "start_time": s("Start, ISO 8601 with offset.", "date-time"),
            "end_time": s("End, ISO 8601 with offset.", "date-time"),
            "location": s("Room, address or video link."),
            "attendees": a(s("Attendee e-mail.", "email"), "People to invite.", 20),
            "visibility": e("Who can see the details.", "default", "public", "private"),
            "reminder_minutes": i("Minutes before the start to remind.", 0, 10080),
        }, ["title", "start_time", "end_time"], ("list", "get", "create", "update", "delete", "search"),
            ("calendar_id", s("Calendar to use; 'primary' is the user's own.")), ("visibility",)),
    ], [
        Action("find_free_slots", "Find free time slots shared by a group of people within a date range, "
               "considering their working hours and existing events.",
               {"attendees": a(s("E-mail.", "email"), "People who must all be free.", 20),
                "duration_minutes": i("Length of the meeting.", 5, 480),
                "window": o("Search window.", {"start_date": s("First day.", "date"), "end_date": s("Last day.", "date")},
                            ["start_date", "end_date"])},
               ["attendees", "duration_minutes", "window"],
               o("Slots.", {"slots": a(o("A slot.", {"start_time": s("Start.", "date-time"),
                                                      "end_time": s("End.", "date-time")}), "Free slots.")})),
        Action("respond_to_invitation", "Respond to a meeting invitation on behalf of the user, optionally "
               "with a note to the organiser.",
               {"event_id": s("The invitation's event."), "response": e("Answer.", "accepted", "declined", "tentative"),
                "note": s("Message to the organiser.")}, ["event_id", "response"], _ok),
    ]),
    Toolset("tasks", "Task Board", "Kanban-style projects with tasks, assignees, due dates and labels.", [
        Resource("task", "tasks", "a task on a project board", {
            "title": s("What has to be done."),
            "description": s("Details, acceptance criteria, links."),
            "assignee": s("E-mail of the person responsible.", "email"),
            "due_date": s("Due date.", "date"),
            "priority": e("Urgency.", "low", "medium", "high", "urgent"),
            "status": e("Column on the board.", "todo", "in_progress", "review", "done"),
            "labels": a(s("Label."), "Labels to attach.", 10),
        }, ["title"], ("list", "get", "create", "update", "delete", "search"),
            ("project_id", s("Project the task belongs to.")), ("status", "priority", "assignee")),
        Resource("project", "projects", "a project grouping tasks", {
            "name": s("Project name."), "owner": s("Owner's e-mail.", "email"),
            "archived": b("Whether the project is archived."),
        }, ["name"], ("list", "get", "create")),
    ], [
        Action("move_task", "Move a task to another column of its board and notify the watchers.",
               {"task_id": s("Task to move."), "status": e("Target column.", "todo", "in_progress", "review", "done")},
               ["task_id", "status"], _ok),
        Action("add_comment", "Add a comment to a task, mentioning people with @e-mail.",
               {"task_id": s("Task."), "text": s("Comment text, Markdown allowed.")}, ["task_id", "text"], _ok),
    ]),
    Toolset("notes", "Notebook", "Markdown notes organised in notebooks, with tags and sharing.", [
        Resource("note", "notes", "a Markdown note", {
            "title": s("Note title."), "body": s("Markdown content."),
            "notebook": s("Notebook name."), "tags": a(s("Tag."), "Tags.", 10), "pinned": b("Keep on top."),
        }, ["title", "body"], ("list", "get", "create", "update", "delete", "search"), None, ("notebook", "pinned")),
    ], [
        Action("share_note", "Share a note with other people with read or edit access.",
               {"note_id": s("Note."), "recipients": a(s("E-mail.", "email"), "Who gets access.", 20),
                "access": e("Access level.", "read", "edit")}, ["note_id", "recipients", "access"], _ok),
        Action("export_notebook", "Export a whole notebook as a single file.",
               {"notebook": s("Notebook name."), "format": e("File format.", "pdf", "markdown", "html")},
               ["notebook", "format"], o("Export.", {"download_url": s("Link.", "uri"), "pages": i("Pages.", 1)})),
    ]),
]

COMMUNICATION = [
    Toolset("mail", "Mailbox", "An e-mail account: messages, drafts, folders and filters.", [
        Resource("draft", "drafts", "an unsent e-mail", {
            "to": a(s("Recipient.", "email"), "Primary recipients.", 50),
            "cc": a(s("Recipient.", "email"), "Copy recipients.", 50),
            "subject": s("Subject line."), "body": s("Plain-text or HTML body."),
            "importance": e("Importance flag.", "low", "normal", "high"),
        }, ["to", "subject", "body"], ("list", "get", "create", "update", "delete")),
        Resource("message", "messages", "a received or sent e-mail", {
            "sender": s("From address.", "email"), "subject": s("Subject."), "folder": e(
                "Folder.", "inbox", "sent", "archive", "spam"), "unread": b("Not yet read."),
        }, ["sender", "subject"], ("list", "get", "search", "delete"), None, ("folder", "unread")),
    ], [
        Action("send_message", "Send an e-mail right away, without keeping a draft.",
               {"to": a(s("Recipient.", "email"), "Recipients.", 50), "subject": s("Subject line."),
                "body": s("Body text."), "attachments": a(o("File.", {"file_name": s("Name."), "url": s("Link.", "uri")},
                                                          ["file_name", "url"]), "Attachments.", 10)},
               ["to", "subject", "body"], o("Sent.", {"message_id": s("Id."), "sent_at": s("Time.", "date-time")})),
        Action("create_filter", "Create a rule that files, labels or forwards incoming mail matching criteria.",
               {"criteria": o("What to match.", {"from": s("Sender.", "email"), "subject_contains": s("Words.")}),
                "action": e("What to do.", "archive", "mark_read", "forward", "delete"),
                "forward_to": s("Forward target.", "email")}, ["criteria", "action"], _ok),
    ]),
    Toolset("chat", "Team Chat", "Team messaging with channels, threads, reactions and status.", [
        Resource("channel", "channels", "a chat channel", {
            "name": s("Channel name without '#'."), "topic": s("Channel topic."),
            "private": b("Invite-only."), "members": a(s("Member handle."), "Initial members.", 100),
        }, ["name"], ("list", "get", "create", "update", "delete"), None, ("private",)),
    ], [
        Action("post_message", "Post a message to a channel or as a reply in a thread.",
               {"channel": s("Channel name."), "text": s("Message text."), "thread_id": s("Thread to reply in.")},
               ["channel", "text"], o("Posted.", {"message_id": s("Id."), "permalink": s("Link.", "uri")})),
        Action("set_status", "Set the user's status text, emoji and automatic expiry.",
               {"text": s("Status text."), "emoji": s("Emoji shortcode like :palm_tree:."),
                "expires_in_minutes": i("Clear after this many minutes.", 1, 10080)}, ["text"], _ok),
        Action("search_messages", "Search messages across the channels the user can read.",
               {"query": s("Words to find."), "channel": s("Limit to a channel."), "from_user": s("Author handle.")},
               ["query"], o("Hits.", {"matches": a(o("Hit.", {"channel": s("Channel."), "text": s("Text.")}), "Hits.")})),
    ]),
    Toolset("contacts", "Address Book", "People and companies with phone numbers, addresses and groups.", [
        Resource("contact", "contacts", "a person in the address book", {
            "full_name": s("Name as displayed."), "email": s("E-mail.", "email"), "phone": s("Phone, E.164."),
            "company": s("Employer."), "address": _address, "groups": a(s("Group."), "Groups.", 10),
        }, ["full_name"], ("list", "get", "create", "update", "delete", "search"), None, ("company",)),
    ], [
        Action("merge_contacts", "Merge duplicate contacts into one, keeping the primary's conflicting fields.",
               {"primary_id": s("Contact to keep."), "duplicate_ids": a(s("Id."), "Contacts to merge in.", 10)},
               ["primary_id", "duplicate_ids"], _ok),
    ]),
]

DEVOPS = [
    Toolset("repo", "Code Hosting", "Git repositories, branches, pull requests and reviews.", [
        Resource("pull_request", "pull_requests", "a pull request proposing changes", {
            "title": s("Title."), "body": s("Description."), "head_branch": s("Branch with the changes."),
            "base_branch": s("Branch to merge into."), "draft": b("Open as a draft."),
            "reviewers": a(s("Reviewer handle."), "Requested reviewers.", 10),
        }, ["title", "head_branch", "base_branch"], ("list", "get", "create", "update"),
            ("repository", s("Repository as owner/name.")), ("draft",)),
        Resource("issue", "issues", "an issue in the tracker", {
            "title": s("Title."), "body": s("Markdown body."), "labels": a(s("Label."), "Labels.", 10),
            "state": e("State.", "open", "closed"), "assignees": a(s("Handle."), "Assignees.", 10),
        }, ["title"], ("list", "get", "create", "update", "search"),
            ("repository", s("Repository as owner/name.")), ("state",)),
    ], [
        Action("merge_pull_request", "Merge a pull request once its checks pass.",
               {"repository": s("owner/name."), "number": i("Pull request number.", 1),
                "method": e("Merge method.", "merge", "squash", "rebase")}, ["repository", "number", "method"], _ok),
        Action("create_branch", "Create a branch from another branch or a commit.",
               {"repository": s("owner/name."), "name": s("New branch."), "from_ref": s("Branch or SHA.")},
               ["repository", "name", "from_ref"], _ok),
    ]),
    Toolset("ci", "Build Pipelines", "Continuous integration pipelines, runs, logs and artifacts.", [
        Resource("pipeline", "pipelines", "a CI pipeline definition", {
            "name": s("Pipeline name."), "branch": s("Branch it builds."),
            "trigger": e("When it runs.", "push", "schedule", "manual"), "enabled": b("Active."),
        }, ["name", "branch"], ("list", "get", "update")),
    ], [
        Action("trigger_run", "Start a pipeline run on a branch with optional variables.",
               {"pipeline_id": s("Pipeline."), "branch": s("Branch."),
                "variables": a(o("Variable.", {"key": s("Name."), "value": s("Value.")}, ["key", "value"]),
                               "Build variables.", 20)}, ["pipeline_id", "branch"],
               o("Run.", {"run_id": s("Id."), "state": e("State.", "queued", "running")})),
        Action("get_run_logs", "Get the log output of a pipeline run, optionally one job only.",
               {"run_id": s("Run."), "job": s("Job name."), "tail_lines": i("Last lines only.", 1, 5000)},
               ["run_id"], o("Logs.", {"lines": a(s("Line."), "Log lines."), "truncated": b("Cut.")})),
        Action("cancel_run", "Cancel a queued or running pipeline run.", {"run_id": s("Run.")}, ["run_id"], _ok),
    ]),
    Toolset("cloud", "Cloud Compute", "Virtual machines, volumes and firewall rules in a public cloud.", [
        Resource("instance", "instances", "a virtual machine", {
            "name": s("Hostname."), "machine_type": e("Size.", "small", "medium", "large", "gpu"),
            "region": e("Region.", "eu-west", "eu-central", "us-east", "us-west", "ap-south"),
            "image": s("Boot image, e.g. ubuntu-24.04."), "disk_gb": i("Boot disk size.", 10, 4096),
            "labels": o("Labels.", {"team": s("Owning team."), "env": e("Environment.", "dev", "staging", "prod")}),
        }, ["name", "machine_type", "region", "image"], ("list", "get", "create", "delete"), None,
            ("region", "machine_type")),
    ], [
        Action("resize_instance", "Resize a virtual machine; it is stopped and restarted.",
               {"instance_id": s("Instance."), "machine_type": e("New size.", "small", "medium", "large", "gpu")},
               ["instance_id", "machine_type"], _ok),
        Action("add_firewall_rule", "Add a firewall rule that opens a port range to a source network.",
               {"network": s("Network name."), "protocol": e("Protocol.", "tcp", "udp", "icmp"),
                "ports": o("Port range.", {"from_port": i("First.", 1, 65535), "to_port": i("Last.", 1, 65535)},
                           ["from_port", "to_port"]), "source_cidr": s("Allowed source, e.g. 10.0.0.0/16.")},
               ["network", "protocol", "ports", "source_cidr"], _ok),
    ]),
    Toolset("incidents", "On-Call", "Incidents, alerts, on-call schedules and status pages.", [
        Resource("incident", "incidents", "an operational incident", {
            "title": s("Summary."), "severity": e("Severity.", "sev1", "sev2", "sev3", "sev4"),
            "service": s("Affected service."), "commander": s("Incident commander.", "email"),
            "state": e("State.", "triggered", "acknowledged", "resolved"),
        }, ["title", "severity", "service"], ("list", "get", "create", "update"), None, ("severity", "state")),
    ], [
        Action("page_oncall", "Page whoever is on call for a service with an urgent message.",
               {"service": s("Service."), "message": s("What is wrong."), "urgency": e("Urgency.", "high", "low")},
               ["service", "message"], _ok),
        Action("post_status_update", "Publish an update on the public status page.",
               {"incident_id": s("Incident."), "status": e("Public state.", "investigating", "identified",
                                                              "monitoring", "resolved"), "message": s("Text.")},
               ["incident_id", "status", "message"], _ok),
    ]),
]
