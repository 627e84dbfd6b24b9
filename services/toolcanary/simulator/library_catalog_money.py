"""Toolsets of the default library for money: banking, invoicing, expenses, commerce, shipping and sales.

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

FINANCE = [
    Toolset("bank", "Banking", "Bank accounts, transactions, transfers and standing orders.", [
        Resource("transfer", "transfers", "a money transfer between accounts", {
            "from_account": s("Source IBAN."), "to_account": s("Destination IBAN."), "amount": _money,
            "reference": s("Payment reference."), "execute_on": s("Execution date.", "date"),
        }, ["from_account", "to_account", "amount"], ("list", "get", "create", "delete")),
        Resource("transaction", "transactions", "a booked account transaction", {
            "account": s("IBAN."), "amount": _money, "counterparty": s("Other party."),
            "category": e("Spending category.", "groceries", "rent", "travel", "salary", "utilities", "other"),
        }, ["account", "amount"], ("list", "get", "search"), None, ("category",)),
    ], [
        Action("get_balance", "Get the current and available balance of an account.",
               {"account": s("IBAN.")}, ["account"], o("Balance.", {"current": _money, "available": _money})),
        Action("freeze_card", "Freeze or unfreeze a payment card immediately.",
               {"card_last4": s("Last four digits."), "frozen": b("True to freeze.")}, ["card_last4", "frozen"], _ok),
    ]),
    Toolset("invoices", "Invoicing", "Customer invoices, line items, reminders and payments.", [
        Resource("invoice", "invoices", "an invoice to a customer", {
            "customer": s("Customer name."), "customer_email": s("Billing e-mail.", "email"),
            "due_date": s("Due date.", "date"), "currency": s("ISO 4217 code."),
            "lines": a(o("Line.", {"description": s("Item."), "quantity": i("Qty.", 1), "unit_price": n("Price.", 0)},
                         ["description", "quantity", "unit_price"]), "Line items.", 50),
            "status": e("State.", "draft", "sent", "paid", "overdue"),
        }, ["customer", "due_date", "lines"], ("list", "get", "create", "update", "delete"), None, ("status",)),
    ], [
        Action("send_invoice", "Send an invoice to the customer by e-mail with a payment link.",
               {"invoice_id": s("Invoice."), "message": s("Cover note.")}, ["invoice_id"], _ok),
        Action("record_payment", "Record a payment received against an invoice.",
               {"invoice_id": s("Invoice."), "amount": _money, "received_on": s("Date.", "date"),
                "method": e("Method.", "bank_transfer", "card", "cash")}, ["invoice_id", "amount"], _ok),
    ]),
    Toolset("expenses", "Expense Reports", "Receipts, expense claims and approval workflows.", [
        Resource("expense", "expenses", "an expense claim", {
            "merchant": s("Where the money was spent."), "amount": _money, "spent_on": s("Date.", "date"),
            "category": e("Category.", "travel", "meals", "lodging", "equipment", "software"),
            "project_code": s("Cost centre or project code."),
        }, ["merchant", "amount", "spent_on", "category"], ("list", "get", "create", "update", "delete"), None,
            ("category",)),
    ], [
        Action("submit_report", "Submit a set of expenses as one report for approval.",
               {"title": s("Report title."), "expense_ids": a(s("Expense."), "Expenses to include.", 100),
                "approver": s("Approver e-mail.", "email")}, ["title", "expense_ids"], _ok),
        Action("convert_currency", "Convert an amount between currencies at the reference rate of a date.",
               {"amount": n("Amount.", 0), "from_currency": s("ISO code."), "to_currency": s("ISO code."),
                "date": s("Rate date.", "date")}, ["amount", "from_currency", "to_currency"],
               o("Converted.", {"amount": n("Result."), "rate": n("Rate used.")})),
    ]),
]

COMMERCE = [
    Toolset("shop", "Storefront", "An online shop's products, carts and orders.", [
        Resource("product", "products", "a product for sale", {
            "title": s("Product title."), "sku": s("Stock keeping unit."), "price": _money,
            "stock": i("Units in stock.", 0), "tags": a(s("Tag."), "Tags.", 20),
            "status": e("Visibility.", "active", "draft", "archived"),
        }, ["title", "sku", "price"], ("list", "get", "create", "update", "delete", "search"), None, ("status",)),
        Resource("order", "orders", "a customer order", {
            "customer_email": s("Buyer.", "email"), "shipping_address": _address,
            "items": a(o("Item.", {"sku": s("SKU."), "quantity": i("Qty.", 1)}, ["sku", "quantity"]), "Items.", 50),
            "status": e("State.", "pending", "paid", "shipped", "delivered", "cancelled"),
        }, ["customer_email", "items"], ("list", "get", "create", "update"), None, ("status",)),
    ], [
        Action("refund_order", "Refund an order fully or partly and restock the items if asked.",
               {"order_id": s("Order."), "amount": _money, "restock": b("Put items back in stock."),
                "reason": e("Reason.", "damaged", "not_received", "changed_mind", "other")},
               ["order_id", "reason"], _ok),
        Action("create_discount_code", "Create a discount code with a percentage off and an expiry date.",
               {"code": s("Code customers type."), "percent_off": i("Percent.", 1, 100),
                "expires_on": s("Last valid day.", "date")}, ["code", "percent_off"], _ok),
    ]),
    Toolset("shipping", "Parcel Shipping", "Shipping labels, rate quotes, tracking and pickups.", [
        Resource("shipment", "shipments", "a parcel shipment", {
            "recipient": o("Recipient.", {"name": s("Name."), "address": _address, "phone": s("Phone.")},
                           ["name", "address"]),
            "weight_kg": n("Weight.", 0.01, 70), "service": e("Service level.", "economy", "standard", "express"),
            "insured_value": _money,
        }, ["recipient", "weight_kg", "service"], ("list", "get", "create", "delete"), None, ("service",)),
    ], [
        Action("track_parcel", "Track a parcel by its tracking number and return the scan history.",
               {"tracking_number": s("Tracking number.")}, ["tracking_number"],
               o("Tracking.", {"state": e("State.", "in_transit", "out_for_delivery", "delivered", "exception"),
                               "events": a(o("Scan.", {"time": s("Time.", "date-time"), "place": s("Where.")}),
                                           "Scan events.")})),
        Action("quote_rates", "Quote shipping rates for a parcel between two countries.",
               {"from_country": s("ISO code."), "to_country": s("ISO code."), "weight_kg": n("Weight.", 0.01, 70)},
               ["from_country", "to_country", "weight_kg"],
               o("Quotes.", {"quotes": a(o("Quote.", {"service": s("Service."), "price": _money}), "Rates.")})),
        Action("schedule_pickup", "Schedule a courier pickup at an address on a date.",
               {"address": _address, "date": s("Pickup day.", "date"), "parcels": i("Parcel count.", 1, 50)},
               ["address", "date"], _ok),
    ]),
    Toolset("crm", "Sales CRM", "Leads, deals, pipeline stages and sales activities.", [
        Resource("deal", "deals", "a sales opportunity", {
            "name": s("Deal name."), "company": s("Customer company."), "value": _money,
            "stage": e("Pipeline stage.", "lead", "qualified", "proposal", "negotiation", "won", "lost"),
            "close_date": s("Expected close.", "date"), "owner": s("Sales rep.", "email"),
        }, ["name", "company"], ("list", "get", "create", "update", "delete", "search"), None, ("stage", "owner")),
    ], [
        Action("log_activity", "Log a call, meeting or e-mail against a deal.",
               {"deal_id": s("Deal."), "type": e("Kind.", "call", "meeting", "email"), "summary": s("Notes."),
                "occurred_at": s("When.", "date-time")}, ["deal_id", "type", "summary"], _ok),
    ]),
]
