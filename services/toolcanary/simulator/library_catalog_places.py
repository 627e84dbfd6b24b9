"""Toolsets of the default library for home and surroundings: smart home, energy, chores, learning, maps.

Pure data read by `library_builder`; see `library_schema` for the helpers. Edit here, then rebuild the JSON.
"""

from __future__ import annotations

from toolcanary.simulator.library_schema import Action, Resource, Toolset, a, b, e, i, n, o, s

_ok = o("Outcome.", {"status": e("Outcome of the request.", "accepted", "completed"), "request_id": s("Trace id.")})
_money = o("Price.", {"amount": n("Amount.", 0), "currency": s("ISO 4217 code.")}, ["amount", "currency"])
_traveller = o("A traveller.", {"first_name": s("Given name."), "last_name": s("Family name."),
                                "date_of_birth": s("Birth date.", "date")}, ["first_name", "last_name"])
_point = o("A place.", {"latitude": n("Latitude.", -90, 90), "longitude": n("Longitude.", -180, 180)},
           ["latitude", "longitude"])

HOME = [
    Toolset("home", "Smart Home", "Lights, thermostats, locks and scenes in the user's home.", [
        Resource("scene", "scenes", "a scene setting several devices at once", {
            "name": s("Scene name."), "room": s("Room."),
            "actions": a(o("Device action.", {"device_id": s("Device."), "command": e("Command.", "on", "off", "dim"),
                                              "level": i("Brightness or level.", 0, 100)}, ["device_id", "command"]),
                         "What the scene does.", 30),
        }, ["name", "actions"], ("list", "get", "create", "delete")),
    ], [
        Action("set_thermostat", "Set the target temperature and mode of a thermostat.",
               {"device_id": s("Thermostat."), "target_celsius": n("Target.", 5, 30),
                "mode": e("Mode.", "heat", "cool", "auto", "off")}, ["device_id", "target_celsius"], _ok),
        Action("lock_door", "Lock or unlock a smart lock and return its state.",
               {"device_id": s("Lock."), "locked": b("True to lock.")}, ["device_id", "locked"], _ok),
        Action("list_devices", "List the devices of the home with their room and state.",
               {"room": s("Only this room."), "kind": e("Kind.", "light", "thermostat", "lock", "camera", "plug")},
               [], o("Devices.", {"devices": a(o("Device.", {"device_id": s("Id."), "name": s("Name.")}), "All.")})),
        Action("run_scene", "Run a saved scene now.", {"scene_id": s("Scene.")}, ["scene_id"], _ok),
    ]),
    Toolset("energy", "Energy Monitor", "Electricity usage, tariffs and solar production.", [], [
        Action("get_usage", "Get electricity usage in kWh per hour or day for a period.",
               {"start_date": s("From.", "date"), "end_date": s("Until.", "date"),
                "granularity": e("Resolution.", "hour", "day")}, ["start_date", "end_date", "granularity"],
               o("Usage.", {"total_kwh": n("Total."), "points": a(n("kWh."), "Series.")})),
        Action("compare_tariffs", "Compare electricity tariffs for a postcode and yearly consumption.",
               {"postal_code": s("Postcode."), "yearly_kwh": i("Consumption.", 100, 100000),
                "green_only": b("Renewable only.")}, ["postal_code", "yearly_kwh"],
               o("Tariffs.", {"tariffs": a(o("Tariff.", {"name": s("Name."), "yearly_cost": _money}), "Offers.")})),
        Action("get_solar_forecast", "Forecast solar panel production for the next days.",
               {"days": i("Days ahead.", 1, 7), "panel_kwp": n("Installed peak power.", 0.1, 100)},
               ["days", "panel_kwp"], o("Forecast.", {"kwh_per_day": a(n("kWh."), "Per day.")})),
    ]),
    Toolset("chores", "Household", "Shared chores, groceries and bills for a household.", [
        Resource("chore", "chores", "a recurring household chore", {
            "title": s("Chore."), "assignee": s("Household member."),
            "repeat": e("Repeat.", "none", "daily", "weekly", "monthly"), "due_date": s("Next due.", "date"),
        }, ["title", "assignee"], ("list", "create", "update", "delete")),
        Resource("grocery_item", "grocery_items", "an item on the shared grocery list", {
            "name": s("Item."), "quantity": i("How many.", 1, 100), "store": s("Preferred store."),
        }, ["name"], ("list", "create", "delete")),
    ]),
]

LEARNING = [
    Toolset("courses", "Learning Platform", "Online courses, enrolments, lessons and quizzes.", [
        Resource("enrollment", "enrollments", "a learner's enrolment in a course", {
            "course_id": s("Course."), "learner_email": s("Learner.", "email"),
            "track": e("Track.", "audit", "verified"), "start_date": s("Start.", "date"),
        }, ["course_id", "learner_email"], ("list", "get", "create", "delete")),
    ], [
        Action("search_courses", "Search the course catalog by topic, level and language.",
               {"topic": s("Subject."), "level": e("Level.", "beginner", "intermediate", "advanced"),
                "language": s("ISO 639-1.")}, ["topic"],
               o("Courses.", {"courses": a(o("Course.", {"course_id": s("Id."), "title": s("Title.")}), "Hits.")})),
        Action("submit_quiz", "Submit quiz answers for grading.",
               {"quiz_id": s("Quiz."), "answers": a(o("Answer.", {"question": i("Number.", 1), "choice": s("Choice.")},
                                                       ["question", "choice"]), "Answers.", 100)},
               ["quiz_id", "answers"], o("Grade.", {"score": n("Percent."), "passed": b("Passed.")})),
    ]),
    Toolset("library", "Public Library", "Library catalogue, loans, holds and reading lists.", [
        Resource("hold", "holds", "a hold on a book", {
            "isbn": s("ISBN-13."), "branch": s("Pickup branch."), "notify_by": e("Notice.", "email", "sms"),
        }, ["isbn", "branch"], ("list", "create", "delete")),
    ], [
        Action("search_catalogue", "Search the catalogue by title, author or subject and show availability.",
               {"query": s("Words."), "field": e("Search in.", "title", "author", "subject"),
                "format": e("Format.", "book", "ebook", "audiobook")}, ["query"],
               o("Items.", {"items": a(o("Item.", {"isbn": s("ISBN."), "available": b("On shelf.")}), "Items.")})),
        Action("renew_loan", "Renew a borrowed item for another loan period.",
               {"loan_id": s("Loan.")}, ["loan_id"], o("Renewed.", {"due_date": s("New due date.", "date")})),
    ]),
    Toolset("translate", "Language Tools", "Translation, dictionary look-ups and grammar checks.", [], [
        Action("translate_text", "Translate a text into another language, keeping formatting.",
               {"text": s("Text."), "target_language": s("ISO 639-1."), "source_language": s("ISO 639-1."),
                "formality": e("Register.", "default", "formal", "informal")}, ["text", "target_language"],
               o("Translation.", {"text": s("Result."), "detected_language": s("Source.")})),
        Action("define_word", "Look up definitions, examples and synonyms of a word.",
               {"word": s("Word."), "language": s("ISO 639-1.")}, ["word"],
               o("Entry.", {"definitions": a(s("Sense."), "Senses."), "synonyms": a(s("Word."), "Synonyms.")})),
        Action("check_grammar", "Check spelling and grammar and suggest corrections.",
               {"text": s("Text."), "language": s("ISO 639-1.")}, ["text", "language"],
               o("Issues.", {"issues": a(o("Issue.", {"offset": i("Position."), "suggestion": s("Fix.")}), "Issues.")})),
    ]),
]

MAPS = [
    Toolset("maps", "Maps and Places", "Places, geocoding, routes and travel times.", [
        Resource("saved_place", "saved_places", "a place saved to the user's map", {
            "label": s("Label."), "location": _point, "list_name": e("List.", "favorites", "want_to_go", "work"),
        }, ["label", "location"], ("list", "create", "delete")),
    ], [
        Action("geocode_address", "Turn an address into coordinates.", {"address": s("Address text.")}, ["address"],
               o("Match.", {"location": _point, "confidence": n("From 0 to 1.")})),
        Action("plan_route", "Plan a route between two places by car, bike, foot or public transport.",
               {"origin": s("Start address."), "destination": s("End address."),
                "mode": e("Mode.", "driving", "cycling", "walking", "transit"), "depart_at": s("When.", "date-time"),
                "avoid": a(e("Avoid.", "tolls", "highways", "ferries"), "Avoid.", 3)},
               ["origin", "destination", "mode"],
               o("Route.", {"distance_km": n("Length."), "duration_minutes": i("Time."), "steps": a(s("Step."), "Steps.")})),
        Action("search_nearby", "Search places of a kind near a location, open now if asked.",
               {"near": s("Address or landmark."), "kind": e("Kind.", "restaurant", "cafe", "pharmacy", "atm",
                                                             "charging_station"),
                "radius_m": i("Radius.", 100, 50000), "open_now": b("Only open places.")}, ["near", "kind"],
               o("Places.", {"places": a(o("Place.", {"name": s("Name."), "rating": n("Stars.")}), "Places.")})),
    ]),
    Toolset("weather", "Weather", "Forecasts, current conditions, alerts and air quality.", [], [
        Action("get_forecast", "Get the daily weather forecast for a city.",
               {"city": s("City."), "days": i("Days ahead.", 1, 14), "units": e("Units.", "metric", "imperial")},
               ["city"], o("Forecast.", {"days": a(o("Day.", {"date": s("Day.", "date"), "high": n("High."),
                                                              "low": n("Low.")}), "Days.")})),
        Action("get_air_quality", "Get the air quality index and pollutants for a city.", {"city": s("City.")},
               ["city"], o("Air.", {"aqi": i("Index.", 0, 500), "dominant_pollutant": s("Pollutant.")})),
        Action("subscribe_alerts", "Subscribe to severe weather alerts for a city by e-mail or SMS.",
               {"city": s("City."), "channel": e("Channel.", "email", "sms"), "contact": s("Address or number."),
                "severity": e("Minimum level.", "advisory", "watch", "warning")}, ["city", "channel", "contact"], _ok),
    ]),
    Toolset("parking", "Parking", "Parking garages, reservations and street-parking sessions.", [
        Resource("parking_session", "parking_sessions", "a paid street-parking session", {
            "zone": s("Zone code on the street sign."), "plate": s("Licence plate."),
            "minutes": i("Duration.", 15, 1440),
        }, ["zone", "plate", "minutes"], ("list", "get", "create", "delete")),
    ], [
        Action("find_garages", "Find parking garages near an address with free spaces and prices.",
               {"near": s("Address."), "ev_charging": b("Needs charging.")}, ["near"],
               o("Garages.", {"garages": a(o("Garage.", {"name": s("Name."), "hourly": _money}), "Garages.")})),
    ]),
]
