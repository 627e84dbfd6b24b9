"""Toolsets of the default library for everyday life: travel, health and media.

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

TRAVEL = [
    Toolset("flights", "Flight Booking", "Flight search, fares, bookings and seat selection.", [
        Resource("booking", "bookings", "a flight booking", {
            "offer_id": s("Offer chosen from a search."), "passengers": a(_traveller, "Passengers.", 9),
            "contact_email": s("Where to send tickets.", "email"),
            "cabin": e("Cabin class.", "economy", "premium_economy", "business", "first"),
        }, ["offer_id", "passengers", "contact_email"], ("list", "get", "create", "delete")),
    ], [
        Action("search_flights", "Search flight offers between two airports on a date, cheapest first.",
               {"origin": s("IATA airport code, e.g. FRA."), "destination": s("IATA airport code."),
                "departure_date": s("Outbound day.", "date"), "return_date": s("Return day.", "date"),
                "adults": i("Adult passengers.", 1, 9), "cabin": e("Cabin.", "economy", "business", "first"),
                "max_stops": i("Maximum stops.", 0, 3)}, ["origin", "destination", "departure_date"],
               o("Offers.", {"offers": a(o("Offer.", {"offer_id": s("Id."), "price": _money, "stops": i("Stops.")}),
                                         "Offers.")})),
        Action("select_seat", "Select a seat for a passenger on one flight of a booking.",
               {"booking_id": s("Booking."), "flight_number": s("Flight, e.g. LH400."), "seat": s("Seat like 14C.")},
               ["booking_id", "flight_number", "seat"], _ok),
        Action("check_in", "Check passengers in online and issue boarding passes.",
               {"booking_id": s("Booking."), "last_name": s("Lead passenger's family name.")},
               ["booking_id", "last_name"], o("Passes.", {"boarding_pass_urls": a(s("Link.", "uri"), "Passes.")})),
    ]),
    Toolset("hotels", "Hotel Reservations", "Hotel availability, rooms, reservations and loyalty.", [
        Resource("reservation", "reservations", "a hotel reservation", {
            "hotel_id": s("Hotel."), "check_in": s("Arrival.", "date"), "check_out": s("Departure.", "date"),
            "guests": i("Guests.", 1, 10), "room_type": e("Room.", "single", "double", "twin", "suite"),
            "guest": _traveller, "special_requests": s("Requests for the hotel."),
        }, ["hotel_id", "check_in", "check_out", "guests", "guest"], ("list", "get", "create", "update", "delete")),
    ], [
        Action("search_hotels", "Search hotels with free rooms in a city for given dates and filters.",
               {"city": s("City."), "check_in": s("Arrival.", "date"), "check_out": s("Departure.", "date"),
                "guests": i("Guests.", 1, 10), "min_stars": i("Minimum stars.", 1, 5),
                "amenities": a(e("Amenity.", "wifi", "parking", "pool", "gym", "breakfast"), "Must have.", 5)},
               ["city", "check_in", "check_out"],
               o("Hotels.", {"hotels": a(o("Hotel.", {"hotel_id": s("Id."), "name": s("Name."),
                                                      "price_per_night": _money}), "Hotels.")})),
    ]),
    Toolset("rail", "Rail Travel", "Train timetables, tickets and seat reservations.", [
        Resource("ticket", "tickets", "a train ticket", {
            "journey_id": s("Journey from a timetable search."), "passenger": _traveller,
            "fare_class": e("Class.", "first", "second"), "railcard": e("Discount card.", "none", "youth", "senior"),
        }, ["journey_id", "passenger", "fare_class"], ("list", "get", "create", "delete")),
    ], [
        Action("search_journeys", "Search train journeys between two stations departing after a time.",
               {"from_station": s("Station name."), "to_station": s("Station name."),
                "depart_after": s("Earliest departure.", "date-time"), "direct_only": b("Only direct trains.")},
               ["from_station", "to_station", "depart_after"],
               o("Journeys.", {"journeys": a(o("Journey.", {"journey_id": s("Id."), "duration_minutes": i("Length.")}),
                                             "Journeys.")})),
        Action("get_live_departures", "Get the live departure board of a station with delays and platforms.",
               {"station": s("Station name."), "limit": i("Rows.", 1, 50)}, ["station"],
               o("Board.", {"departures": a(o("Row.", {"train": s("Train."), "delay_minutes": i("Delay.")}), "Rows.")})),
    ]),
]

HEALTH = [
    Toolset("clinic", "Clinic Portal", "Doctor appointments, prescriptions and lab results.", [
        Resource("appointment", "appointments", "a doctor's appointment", {
            "doctor_id": s("Doctor."), "start_time": s("Start.", "date-time"),
            "reason": s("Why the patient comes."), "visit_type": e("Kind.", "in_person", "video", "phone"),
        }, ["doctor_id", "start_time", "visit_type"], ("list", "get", "create", "update", "delete")),
    ], [
        Action("find_doctors", "Find doctors by specialty near a city who accept new patients.",
               {"specialty": e("Specialty.", "general_practice", "dermatology", "cardiology", "pediatrics",
                               "orthopedics"), "city": s("City."), "language": s("Spoken language, ISO 639-1.")},
               ["specialty", "city"],
               o("Doctors.", {"doctors": a(o("Doctor.", {"doctor_id": s("Id."), "name": s("Name.")}), "Doctors.")})),
        Action("request_refill", "Request a refill of an existing prescription at a pharmacy.",
               {"prescription_id": s("Prescription."), "pharmacy": s("Pharmacy name.")},
               ["prescription_id", "pharmacy"], _ok),
    ]),
    Toolset("fitness", "Fitness Tracker", "Workouts, goals, sleep and heart-rate data.", [
        Resource("workout", "workouts", "a logged workout", {
            "sport": e("Sport.", "running", "cycling", "swimming", "strength", "yoga"),
            "started_at": s("Start.", "date-time"), "duration_minutes": i("Length.", 1, 1440),
            "distance_km": n("Distance.", 0), "perceived_effort": i("Effort from 1 to 10.", 1, 10),
        }, ["sport", "started_at", "duration_minutes"], ("list", "get", "create", "delete"), None, ("sport",)),
        Resource("goal", "goals", "a training goal", {
            "metric": e("What is measured.", "steps", "distance_km", "active_minutes", "workouts"),
            "target": n("Target value per period.", 0), "period": e("Period.", "daily", "weekly", "monthly"),
        }, ["metric", "target", "period"], ("list", "create", "update", "delete")),
    ], [
        Action("get_sleep_summary", "Get a summary of sleep duration and stages for a range of nights.",
               {"start_date": s("First night.", "date"), "end_date": s("Last night.", "date")},
               ["start_date", "end_date"], o("Sleep.", {"average_hours": n("Hours."), "nights": i("Nights.")})),
    ]),
    Toolset("nutrition", "Meal Planner", "Recipes, meal plans, shopping lists and nutrition facts.", [
        Resource("meal_plan", "meal_plans", "a weekly meal plan", {
            "week_start": s("Monday of the week.", "date"), "diet": e("Diet.", "omnivore", "vegetarian", "vegan",
                                                                       "keto"),
            "servings": i("Servings per meal.", 1, 12), "exclude": a(s("Ingredient."), "Ingredients to avoid.", 20),
        }, ["week_start", "diet"], ("list", "get", "create", "delete")),
    ], [
        Action("search_recipes", "Search recipes by ingredients, cuisine and maximum cooking time.",
               {"ingredients": a(s("Ingredient."), "Must use.", 10), "cuisine": s("Cuisine, e.g. thai."),
                "max_minutes": i("Time limit.", 5, 600)}, ["ingredients"],
               o("Recipes.", {"recipes": a(o("Recipe.", {"recipe_id": s("Id."), "title": s("Title.")}), "Hits.")})),
        Action("get_nutrition_facts", "Get calories and macronutrients for a food and portion.",
               {"food": s("Food name."), "grams": n("Portion.", 1, 5000)}, ["food", "grams"],
               o("Facts.", {"kcal": n("Energy."), "protein_g": n("Protein."), "carbs_g": n("Carbs.")})),
        Action("build_shopping_list", "Build a shopping list from a meal plan, grouped by aisle.",
               {"meal_plan_id": s("Plan."), "pantry": a(s("Item at home."), "Skip these.", 50)},
               ["meal_plan_id"], o("List.", {"items": a(s("Item."), "Items.")})),
    ]),
]

MEDIA = [
    Toolset("music", "Music Streaming", "Tracks, albums, playlists and playback on the user's devices.", [
        Resource("playlist", "playlists", "a playlist", {
            "name": s("Title."), "description": s("Description."), "public": b("Visible on the profile."),
            "track_ids": a(s("Track."), "Tracks in order.", 500),
        }, ["name"], ("list", "get", "create", "update", "delete")),
    ], [
        Action("search_catalog", "Search the music catalog for tracks, albums or artists.",
               {"query": s("Words."), "type": e("What to find.", "track", "album", "artist"),
                "limit": i("Results.", 1, 50)}, ["query", "type"],
               o("Hits.", {"results": a(o("Hit.", {"id": s("Id."), "name": s("Name.")}), "Hits.")})),
        Action("start_playback", "Start playing a track, album or playlist on a device.",
               {"uri": s("What to play."), "device": s("Device name."), "shuffle": b("Shuffle."),
                "volume_percent": i("Volume.", 0, 100)}, ["uri"], _ok),
    ]),
    Toolset("photos", "Photo Library", "Photos, albums, sharing and automatic tagging.", [
        Resource("album", "albums", "a photo album", {
            "title": s("Title."), "cover_photo_id": s("Cover."), "shared_with": a(s("E-mail.", "email"), "Viewers.", 50),
        }, ["title"], ("list", "get", "create", "update", "delete")),
    ], [
        Action("search_photos", "Search photos by people, place, date range and detected objects.",
               {"text": s("Words like 'beach sunset'."), "taken_after": s("From.", "date"),
                "taken_before": s("Until.", "date"), "people": a(s("Person."), "People in the photo.", 10)},
               ["text"], o("Photos.", {"photo_ids": a(s("Id."), "Matches.")})),
        Action("add_to_album", "Add photos to an album.",
               {"album_id": s("Album."), "photo_ids": a(s("Photo."), "Photos.", 500)}, ["album_id", "photo_ids"], _ok),
    ]),
    Toolset("video", "Video Platform", "Uploaded videos, captions, comments and analytics.", [
        Resource("video", "videos", "an uploaded video", {
            "title": s("Title."), "description": s("Description."), "privacy": e("Privacy.", "public", "unlisted",
                                                                                 "private"),
            "tags": a(s("Tag."), "Tags.", 30), "publish_at": s("Scheduled publication.", "date-time"),
        }, ["title"], ("list", "get", "update", "delete"), None, ("privacy",)),
    ], [
        Action("get_video_analytics", "Get views, watch time and audience retention of a video over a period.",
               {"video_id": s("Video."), "start_date": s("From.", "date"), "end_date": s("Until.", "date"),
                "metrics": a(e("Metric.", "views", "watch_minutes", "likes", "subscribers_gained"), "Metrics.", 4)},
               ["video_id", "start_date", "end_date"], o("Report.", {"rows": a(o("Row.", {"date": s("Day.", "date"),
                                                                                      "value": n("Value.")}), "Rows.")})),
        Action("add_captions", "Upload a caption track in a language for a video.",
               {"video_id": s("Video."), "language": s("ISO 639-1."), "caption_url": s("SRT file.", "uri")},
               ["video_id", "language", "caption_url"], _ok),
    ]),
]
