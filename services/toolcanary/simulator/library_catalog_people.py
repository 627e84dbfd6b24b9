"""Toolsets of the default library for people operations: HR records, recruiting and the IT help desk.

Pure data read by `library_builder`; see `library_schema` for the helpers. Edit here, then rebuild the JSON.
"""

from __future__ import annotations

from toolcanary.simulator.library_schema import Action, Resource, Toolset, a, b, e, i, n, o, s

_ok = o("Outcome.", {"status": e("Outcome of the request.", "accepted", "completed"), "request_id": s("Trace id.")})

PEOPLE = [
    Toolset("hr", "People Directory", "Employee records, teams, time off and reporting lines.", [
        Resource("employee", "employees", "an employee record", {
            "full_name": s("Legal name."), "work_email": s("Company e-mail.", "email"),
            "department": e("Department.", "engineering", "sales", "finance", "operations", "people"),
            "manager_email": s("Manager's e-mail.", "email"), "start_date": s("First working day.", "date"),
            "employment_type": e("Contract.", "full_time", "part_time", "contractor"),
        }, ["full_name", "work_email", "department", "start_date"], ("list", "get", "create", "update", "search"),
            None, ("department", "employment_type")),
        Resource("time_off_request", "time_off_requests", "a request for leave", {
            "employee_email": s("Who is away.", "email"), "start_date": s("First day off.", "date"),
            "end_date": s("Last day off.", "date"), "kind": e("Leave type.", "vacation", "sick", "parental", "unpaid"),
            "note": s("Message to the approver."),
        }, ["employee_email", "start_date", "end_date", "kind"], ("list", "get", "create", "delete"), None, ("kind",)),
    ], [
        Action("approve_time_off", "Approve or reject a pending time-off request and notify the employee.",
               {"time_off_request_id": s("Request."), "decision": e("Decision.", "approved", "rejected"),
                "comment": s("Reason shown to the employee.")}, ["time_off_request_id", "decision"], _ok),
        Action("get_org_chart", "Get the reporting tree below a manager, down to a given depth.",
               {"manager_email": s("Root of the tree.", "email"), "depth": i("Levels.", 1, 6)}, ["manager_email"],
               o("Tree.", {"reports": a(o("Report.", {"full_name": s("Name."), "title": s("Job title.")}), "Reports.")})),
    ]),
    Toolset("recruiting", "Applicant Tracking", "Job openings, candidates, interviews and offers.", [
        Resource("candidate", "candidates", "a job applicant", {
            "full_name": s("Name."), "email": s("E-mail.", "email"), "job_id": s("Opening applied for."),
            "stage": e("Hiring stage.", "applied", "screen", "interview", "offer", "hired", "rejected"),
            "source": e("Where they came from.", "referral", "job_board", "agency", "career_site"),
        }, ["full_name", "email", "job_id"], ("list", "get", "create", "update", "search"), None, ("stage", "source")),
    ], [
        Action("schedule_interview", "Schedule an interview with a panel and send calendar invitations to everyone.",
               {"candidate_id": s("Candidate."), "start_time": s("Start.", "date-time"),
                "duration_minutes": i("Length.", 15, 240),
                "interviewers": a(s("Interviewer e-mail.", "email"), "Panel.", 6),
                "format": e("Format.", "video", "onsite", "phone")},
               ["candidate_id", "start_time", "interviewers"], _ok),
        Action("send_offer", "Send a written job offer with salary and start date to a candidate.",
               {"candidate_id": s("Candidate."), "salary": o("Yearly salary.", {"amount": n("Amount.", 0),
                                                                                "currency": s("ISO 4217 code.")},
                                                            ["amount", "currency"]),
                "start_date": s("Proposed start.", "date"), "expires_on": s("Offer deadline.", "date")},
               ["candidate_id", "salary", "start_date"], _ok),
    ]),
    Toolset("helpdesk", "IT Help Desk", "Support tickets, device inventory and account access requests.", [
        Resource("ticket", "tickets", "an IT support ticket", {
            "subject": s("Short summary."), "details": s("What happened, with error messages."),
            "requester": s("Who needs help.", "email"), "urgency": e("Urgency.", "low", "normal", "high", "critical"),
            "category": e("Area.", "hardware", "software", "network", "access"),
        }, ["subject", "requester", "category"], ("list", "get", "create", "update", "search"), None,
            ("urgency", "category")),
    ], [
        Action("reset_password", "Reset a user's password and send a one-time sign-in link to their recovery e-mail.",
               {"user_email": s("Account.", "email"), "revoke_sessions": b("Sign out everywhere.")},
               ["user_email"], _ok),
        Action("grant_access", "Grant a user access to an application with a role, optionally until a date.",
               {"user_email": s("Account.", "email"), "application": s("Application name."),
                "role": e("Role.", "viewer", "editor", "admin"), "expires_on": s("Last day of access.", "date")},
               ["user_email", "application", "role"], _ok),
    ]),
]
